"""function_config.enable_qat: the quantization-aware training pass inserts legacy's observers and fake
quantizations (names, which values, settings) and the job computes what numpy computes from them."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _config(per_channel: bool = False, symmetric: bool = True, backend: str = "", stop: int | None = 1000):
    cfg = flow.FunctionConfig()
    cfg.enable_qat(True)
    cfg.qat.per_channel_weight_quantization(per_channel)
    cfg.qat.symmetric(symmetric)
    cfg.qat.target_backend(backend)
    if stop is not None:
        cfg.qat.moving_min_max_stop_update_after_iters(stop)
    return cfg


def _sgd(lr: float = 0.0):
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]), momentum=0)


def _conv_job(cfg):
    @flow.global_function(type="train", function_config=cfg)
    def conv(x: tp.Numpy.Placeholder((2, 3, 4, 5))) -> tp.Numpy:
        y = flow.layers.conv2d(x, 4, 3, 1, "SAME", use_bias=True, name="conv1")
        with flow.experimental.scope.config(quantization_aware_training=False):
            z = flow.layers.conv2d(y, 4, 3, 1, "SAME", use_bias=True, name="conv2")
        _sgd().minimize(z)
        return z

    return conv


def _nodes(fn):
    return {node.name: node for node in fn.plan().job.nodes}


def _input(fn) -> str:
    """The dashed lbn of the function's first placeholder (its name comes from the process-wide counter)."""
    return fn.plan().job.placeholders[0].lbn.replace("/", "-")


def test_the_pass_quantizes_a_convolution_as_legacy_did():
    conv = _conv_job(_config(per_channel=True))
    conv(RNG.standard_normal((2, 3, 4, 5)).astype(np.float32))
    nodes, x = _nodes(conv), _input(conv)
    quantized = {name: node for name, node in nodes.items() if node.op == "fake_quantization"}
    # conv1's input, weight and bias, and its output read by conv2; conv2 (quantization off) keeps its own
    assert sorted(quantized) == sorted([f"{x}-fake-quant", "conv1-bias-out-fake-quant",
                                        "conv1-bias_add-out_0-fake-quant", "conv1-weight-out-fake-quant"])
    assert nodes[f"{x}-fake-quant-observer"].op == "moving_average_min_max_observer"
    weight_observer = nodes["conv1-weight-out-fake-quant-observer"]
    assert weight_observer.op == "min_max_observer" and weight_observer.attrs["per_layer_quantization"] is False
    # the bias's scale: input scale times the per-channel weight scales, zero point a zero variable
    bias_scale = nodes["conv1-bias-out-fake-quant-mul-bias"]
    assert bias_scale.op == "multiply"
    assert bias_scale.inputs == (f"{x}-fake-quant-observer/scale", "conv1-weight-out-fake-quant-observer/scale")
    assert quantized["conv1-bias-out-fake-quant"].inputs[2] == "conv1-bias-out-fake-quant-zp/out"
    variables = conv.plan().job.variables
    assert variables["conv1-bias-out-fake-quant-zp"].spec.shape == (4,)
    assert variables[f"{x}-fake-quant-observer-fake-quant-moving-max"].spec.shape == (1,)
    # the moving observers count the job's own steps (the optimizer's counter)
    assert nodes[f"{x}-fake-quant-observer"].inputs[1] == "System-Train-TrainStep-conv/out"
    readers = {lbn: [n.name for n in nodes.values() if lbn in n.inputs] for lbn in
               ("conv1-bias_add-out_0-fake-quant/out_0", "conv2-weight/out", "conv2-bias/out")}
    assert readers["conv1-bias_add-out_0-fake-quant/out_0"]  # conv2 reads conv1's quantized output
    for lbn in ("conv2-weight/out", "conv2-bias/out"):  # ... and its own weight and bias as they are
        assert readers[lbn] and not any(name.endswith("-fake-quant") for name in readers[lbn]), readers


def test_cambricon_quantizes_inputs_only_with_its_formula():
    conv = _conv_job(_config(backend="cambricon"))
    conv(RNG.standard_normal((2, 3, 4, 5)).astype(np.float32))
    nodes = _nodes(conv)
    quantized = sorted(n.name for n in nodes.values() if n.op == "fake_quantization")
    # the values conv1 (and its bias_add) read; not its output
    assert quantized == sorted([f"{_input(conv)}-fake-quant", "conv1-bias-out-fake-quant",
                                "conv1-weight-out-fake-quant"])
    assert {nodes[q].attrs["quantization_formula"] for q in quantized} == {"cambricon"}


def _fake(v, low, high, symmetric):
    """Legacy's Google formulas in numpy (float32), one range per row of ``low``/``high``'s broadcast."""
    if symmetric:
        scale = (np.maximum(np.abs(low), np.abs(high)) / np.float32(127)).astype(np.float32)
        return np.clip(np.rint(v / scale), -128, 127) * scale
    scale = ((high - low) / np.float32(255)).astype(np.float32)
    zero = -np.copysign(np.floor(np.abs(low / scale) + 0.5), low / scale)
    return (np.clip(np.rint(v / scale + zero), 0, 255) - zero) * scale


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_a_quantized_matmul_computes_what_numpy_computes(per_channel, symmetric, seed):
    rng = np.random.default_rng(seed)  # its own data whatever order the tests run in
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w0 = rng.standard_normal((2, 3)).astype(np.float32)

    @flow.global_function(type="train", function_config=_config(per_channel, symmetric))
    def dense(inp: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2, 3), initializer=lambda shape, dtype, rng: w0.astype(dtype))
        y = flow.matmul(inp, w, transpose_b=True)
        _sgd().minimize(y)
        return y

    got = dense(x)
    xq = _fake(x, x.min(), x.max(), symmetric)  # the first step's range is the batch's
    if per_channel:
        wq = _fake(w0, w0.min(axis=1, keepdims=True), w0.max(axis=1, keepdims=True), symmetric)
    else:
        wq = _fake(w0, w0.min(), w0.max(), symmetric)
    y = (xq @ wq.T).astype(np.float32)
    want = _fake(y, y.min(), y.max(), symmetric)  # the matmul's output, read by the return, is quantized too
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(got, x @ w0.T)


def test_the_moving_range_stops_after_the_configured_steps():
    @flow.global_function(type="train", function_config=_config(stop=1))
    def pool(x: tp.Numpy.Placeholder((1, 1, 2, 2))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.constant_initializer(1.0))
        y = flow.nn.avg_pool2d(x * w, 2, 1, "VALID", name="pool")
        _sgd().minimize(y)
        return y

    base = np.array([[[[1.0, -2.0], [0.5, 0.25]]]], np.float32)
    for k in (1.0, 3.0, 10.0):  # steps 0 and 1 move the range (momentum 0.95), step 2 no longer does
        pool(base * k)
    (quantized,) = [lbn for lbn in _nodes(pool)["pool"].inputs if lbn.endswith("-fake-quant/out_0")]
    observer = quantized[:-len("/out_0")] + "-observer"
    state = flow.get_all_variables()
    # the pool's input x * w: max |x| is 2, then 6, then 20
    np.testing.assert_allclose(state[f"{observer}-fake-quant-moving-max"].numpy(), [0.95 * 2 + 0.05 * 6], rtol=1e-6)
    np.testing.assert_allclose(state[f"{observer}-fake-quant-moving-min"].numpy(), [0.95 * 2 + 0.05 * 6], rtol=1e-6)


def test_a_predict_job_reads_its_ranges_with_its_own_step_variable():
    @flow.global_function(function_config=_config())
    def infer(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.math.add_n([x, x])

    x = np.array([[1.5, -0.4, 2.6], [0.2, 3.5, -1.5]], np.float32)
    got = infer(x)
    observer = _nodes(infer)[f"{_input(infer)}-fake-quant-observer"]
    assert observer.attrs["training"] is False
    assert observer.inputs[1] == f"{_input(infer)}-fake-quant-observer-fake-train-step/out"
    # a range never set: both moving values 0, scale 1 (legacy: 0, and NaN values), so x rounds to integers
    np.testing.assert_array_equal(got, np.rint(np.rint(x) * 2))


@pytest.mark.parametrize("call, message", [
    (lambda c: c.qat.target_backend("tpu"), r"function_config\.qat\.target_backend expects one of '', "
                                            r"'tensorrt7', 'cambricon', got 'tpu'"),
    (lambda c: c.qat.moving_min_max_momentum(1.5), r"function_config\.qat\.moving_min_max_momentum expects a "
                                                   r"number in \[0, 1\], got 1\.5"),
    (lambda c: c.qat.moving_min_max_stop_update_after_iters(0),
     r"function_config\.qat\.moving_min_max_stop_update_after_iters expects an int >= 1, got 0"),
    (lambda c: c.qat.symmetric("yes"), r"function_config\.qat\.symmetric expects a bool, got 'yes'"),
])
def test_bad_qat_options_are_refused_naming_them(call, message):
    with pytest.raises(ConfigError, match=message):
        call(flow.FunctionConfig())


def test_an_activation_without_a_stop_step_is_refused_naming_the_option():
    conv = _conv_job(_config(stop=None))
    with pytest.raises(ConfigError, match=r"job 'conv': function_config\.enable_qat\(True\) quantizes the "
                                          r"activation 'Input_\d+/out'.*qat\.moving_min_max_stop_update_after_iters"):
        conv(np.zeros((2, 3, 4, 5), np.float32))


def test_cambricon_per_channel_is_refused_naming_both_options():
    conv = _conv_job(_config(per_channel=True, backend="cambricon"))
    with pytest.raises(ConfigError, match=r"per_channel_weight_quantization\(True\) does not go with "
                                          r"qat\.target_backend\('cambricon'\)"):
        conv(np.zeros((2, 3, 4, 5), np.float32))


def test_the_two_legacy_names_set_one_switch():
    cfg = flow.FunctionConfig()
    cfg.enable_qat(True)
    cfg.enable_quantization_aware_training(False)
    assert cfg.get("enable_quantization_aware_training") is False


def test_eager_mode_leaves_the_job_unquantized_with_a_warning():
    # legacy's eager jobs skipped the rewrite
    x = RNG.standard_normal((4, 3)).astype(np.float32)

    @flow.global_function(function_config=_config())
    def dense(inp: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.matmul(inp, inp, transpose_b=True)

    flow.enable_eager_execution(True)
    try:
        with pytest.warns(UserWarning, match=r"job 'dense': function_config\.enable_qat\(True\) has no effect in "
                                             r"eager mode"):
            got = dense(x)
    finally:
        flow.enable_eager_execution(False)
    np.testing.assert_allclose(got, x @ x.T, rtol=1e-5)
