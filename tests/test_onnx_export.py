"""flow.onnx.export as legacy v0.4 (its test/onnx/util.py: save a checkpoint, export the job with its folder,
run the model with onnxruntime against the job's own outputs). The model always passes onnx.checker; the
comparison with onnxruntime runs where onnxruntime is installed."""
from __future__ import annotations

import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

onnx = pytest.importorskip("onnx", reason="the onnx package (flowjob-ops[onnx]) is not installed")
fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
RNG = np.random.default_rng(2804)


def _export(job, tmp_path, **kwargs):
    """Legacy's convert_to_onnx_and_check: init and save the variables, export with that folder."""
    flow.train.CheckPoint().init()
    weights = tmp_path / "weights"
    flow.checkpoint.save(str(weights))
    path = str(tmp_path / "model.onnx")
    flow.onnx.export(job, str(weights), path, **kwargs)
    model = onnx.load(path)
    onnx.checker.check_model(path if kwargs.get("external_data") else model)
    return path, model


def _run(path, feeds):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: the model passed onnx.checker, "
                                                    "but running it against flowjob's outputs needs onnxruntime")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(job, tmp_path, feeds, rtol=1e-5, atol=1e-5, **kwargs):
    path, model = _export(job, tmp_path, **kwargs)
    want = job(*feeds.values())
    (got,) = _run(path, feeds)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return model


@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_a_convolutional_network(tmp_path, data_format, opset):
    """conv2d, bias_add, batch norm (inference), relu, both poolings, a flatten and a dense layer."""
    shape = (2, 3, 9, 9) if data_format == "NCHW" else (2, 9, 9, 3)
    channel = 1 if data_format == "NCHW" else 3

    @flow.global_function()
    def cnn(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        y = flow.layers.conv2d(x, 4, 3, padding="SAME", data_format=data_format, activation=flow.nn.relu,
                               kernel_initializer=flow.random_normal_initializer(), name="conv")
        y = flow.layers.batch_normalization(y, axis=channel, training=False, name="bn")
        y = flow.nn.max_pool2d(y, 2, 2, "VALID", data_format=data_format)
        y = flow.nn.avg_pool2d(y, 3, 1, "SAME", data_format=data_format)
        y = flow.reshape(y, (2, -1))
        return flow.layers.dense(y, 5, activation=flow.math.tanh, name="fc",
                                 kernel_initializer=flow.random_normal_initializer())

    model = _check(cnn, tmp_path, {"x": RNG.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-5,
                   opset=opset)
    assert model.opset_import[0].version == opset
    kinds = {n.op_type for n in model.graph.node}
    assert {"Conv", "MaxPool", "AveragePool", "MatMul", "Relu", "Tanh"} <= kinds
    assert {i.name for i in model.graph.input} == {"x"}


@pytest.mark.parametrize("opset", [10, 11, 13])
def test_elementwise_matrix_and_shape_ops(tmp_path, opset):
    @flow.global_function()
    def mixed(a: tp.Numpy.Placeholder((4, 6)), b: tp.Numpy.Placeholder((6, 4))) -> tp.Numpy:
        w = flow.get_variable("w", (4, 4), initializer=flow.random_uniform_initializer())
        y = flow.matmul(a, b) + w
        y = flow.matmul(y, w, transpose_b=True) * 0.5 - y / 3.0
        y = flow.math.sigmoid(y) + flow.math.maximum(y, 0.1 * y)
        y = flow.nn.softmax(flow.transpose(y, perm=[1, 0]))
        y = flow.concat([y, flow.math.square(y)], axis=1)
        y = flow.nn.bias_add(y, flow.get_variable("b", (8,), initializer=flow.random_uniform_initializer()))
        return flow.math.reduce_mean(flow.reshape(y, (2, 2, 8)), axis=1) + flow.math.reduce_sum(y)

    _check(mixed, tmp_path, {"a": RNG.standard_normal((4, 6)).astype(np.float32),
                             "b": RNG.standard_normal((6, 4)).astype(np.float32)}, opset=opset)


@pytest.mark.parametrize("opset", [10, 11, 13])
def test_activations_padding_and_gathers(tmp_path, opset):
    @flow.global_function()
    def more(x: tp.Numpy.Placeholder((3, 4)), i: tp.Numpy.Placeholder((5,), dtype=flow.int32)) -> tp.Numpy:
        y = flow.math.gelu(x) + flow.nn.elu(x) + flow.nn.selu(x) + flow.nn.leaky_relu(x, alpha=0.1)
        y = flow.clip_by_value(y, min_value=-1.5, max_value=2.0) + flow.clip_by_value(x, max_value=0.5)
        y = flow.nn.log_softmax(flow.pad(y, paddings=((1, 0), (0, 2)), constant_value=0.25), axis=0)
        return flow.gather(y, i, axis=1)

    _check(more, tmp_path, {"x": RNG.standard_normal((3, 4)).astype(np.float32),
                            "i": np.array([0, 5, 2, 2, 1], np.int32)}, opset=opset)


def test_external_data_keeps_the_weights_beside_the_model(tmp_path):
    @flow.global_function()
    def dense(x: tp.Numpy.Placeholder((3, 64))) -> tp.Numpy:
        return flow.layers.dense(x, 32, activation=flow.nn.relu, name="big")

    path, model = _export(dense, tmp_path, external_data=True)
    assert os.path.getsize(path + ".data") >= 64 * 32 * 4  # the kernel's values are there, not in the model
    x = RNG.standard_normal((3, 64)).astype(np.float32)
    (got,) = _run(path, {"x": x})
    np.testing.assert_allclose(got, dense(x), rtol=1e-5, atol=1e-6)


def test_an_op_without_a_mapping_is_refused_by_name(tmp_path):
    @flow.global_function()
    def lgamma_job(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.math.lgamma(x, name="the_lgamma")

    with pytest.raises(ValueError, match=r"op 'the_lgamma' \(lgamma\) at .* has no ONNX mapping: ONNX has no "
                                         r"log-gamma function"):
        _export(lgamma_job, tmp_path)
    assert not os.path.exists(tmp_path / "model.onnx")


def test_a_variable_missing_from_the_checkpoint_is_named(tmp_path):
    @flow.global_function()
    def first(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="one")

    flow.train.CheckPoint().init()
    flow.checkpoint.save(str(tmp_path / "weights"))

    @flow.global_function()
    def second(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.matmul(x, flow.get_variable("later", (3, 2), initializer=flow.zeros_initializer()))

    with pytest.raises(ValueError, match="variable 'later' is not in the checkpoint"):
        flow.onnx.export(second, str(tmp_path / "weights"), str(tmp_path / "model.onnx"))


def test_config_options_that_mean_nothing_here_are_refused(tmp_path):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.relu(x)

    with pytest.raises(ValueError, match="continue_on_error=True"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"), continue_on_error=True)
    with pytest.raises(ValueError, match=r"opset must be an int in \[10"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"), opset=9)


def test_without_the_onnx_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from flowjob_core import MissingPackageError

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.relu(x)

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if it were not installed
    with pytest.raises(MissingPackageError, match=r"pip install 'flowjob-ops\[onnx\]'"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"))


# legacy v0.4's test/onnx/nodes, as written there: opsets 10 and 11 ----------------------------------------
@pytest.mark.parametrize("opset", [10, 11])
def test_legacy_softmax_reduction_and_pad_nodes_at_old_opsets(tmp_path, opset):
    """Softmax over a middle axis (opset 10's Softmax flattens to 2-D), reduces whose axes are attributes,
    Pad and Clip whose bounds are attributes before opset 11."""

    @flow.global_function()
    def nodes(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        y = flow.nn.softmax(x, axis=1) + flow.math.reduce_max(x, axis=[0, 2], keepdims=True)
        y = flow.pad(y, paddings=((0, 0), (1, 1), (2, 0)), constant_value=1.5)
        y = flow.clip_by_value(y, min_value=-0.5, max_value=2.5)
        return flow.math.reduce_sum(flow.math.reduce_mean(y, axis=2), axis=0)

    model = _check(nodes, tmp_path, {"x": RNG.uniform(-10, 10, (2, 3, 4)).astype(np.float32)}, opset=opset)
    pad = next(n for n in model.graph.node if n.op_type == "Pad")
    assert [a.name for a in pad.attribute if a.name == "pads"] == (["pads"] if opset == 10 else [])


@pytest.mark.parametrize("opset", [10, 11])
def test_legacy_math_nodes_new_to_the_exporter(tmp_path, opset):
    """The inverse and hyperbolic functions, round and the comparisons, as legacy's test_math.py uses them."""

    @flow.global_function()
    def math_job(x: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        small = x / 20.0
        y = flow.math.acos(small) + flow.math.asin(small) + flow.math.atan(x) + flow.math.atanh(small)
        y = y + flow.math.asinh(x) + flow.math.acosh(flow.math.abs(x) + 1.0) + flow.math.tan(small)
        y = y + flow.math.sinh(small) + flow.math.cosh(small) + flow.math.round(x)
        mask = flow.math.less(x, 1.0) + flow.math.greater_equal(x, 3.0) + flow.math.equal(x, x)
        mask = mask + flow.math.not_equal(x, 2.0) + flow.math.less_equal(x, 0.0) + flow.math.greater(x, -1.0)
        return y + flow.cast(mask, flow.float)

    x = RNG.uniform(-10, 10, (3, 4)).astype(np.float32)
    x[0, :2] = (2.5, -1.5)  # halves round to even
    _check(math_job, tmp_path, {"x": x}, rtol=1e-4, atol=1e-4, opset=opset)


def test_legacy_gather_nd_and_the_opset_it_needs(tmp_path):
    @flow.global_function()
    def gather_nd_job(x: tp.Numpy.Placeholder((3, 4, 2)), i: tp.Numpy.Placeholder((5, 2), dtype=flow.int32)
                      ) -> tp.Numpy:
        return flow.gather_nd(x, i, name="the_gather_nd")

    feeds = {"x": RNG.standard_normal((3, 4, 2)).astype(np.float32),
             "i": np.array([[0, 1], [2, 3], [1, 0], [2, 2], [0, 0]], np.int32)}
    model = _check(gather_nd_job, tmp_path, feeds, opset=11)
    assert "GatherND" in {n.op_type for n in model.graph.node}
    with pytest.raises(ValueError, match=r"op 'the_gather_nd' \(gather_nd\): ONNX opset 10 has no GatherND, which "
                                         r"this op is written with; export with opset >= 11"):
        _export(gather_nd_job, tmp_path / "at10", opset=10)


def _variable_x():
    return flow.get_variable(name="x1", shape=(2, 3, 4), dtype=flow.float,
                             initializer=flow.random_uniform_initializer(-10, 10))


@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
@pytest.mark.parametrize("per_layer", [True, False])
def test_legacy_fake_quantization_with_min_max_observer(tmp_path, per_layer, scheme):
    """legacy's test_fake_quantization.py: opset 10 per layer, 13 per channel (QuantizeLinear's axis)."""

    @flow.global_function()
    def fake_quantization():
        x = _variable_x()
        return flow.quantization.fake_quantization(
            x, *flow.quantization.min_max_observer(x, per_layer_quantization=per_layer, quantization_scheme=scheme),
            quantization_scheme=scheme)

    opset = 10 if per_layer else 13
    path, model = _export(fake_quantization, tmp_path, opset=opset)
    np.testing.assert_allclose(_run(path, {})[0], fake_quantization().get().numpy(), rtol=1e-4, atol=1e-5)
    kinds = {n.op_type for n in model.graph.node}
    assert ({"QuantizeLinear", "DequantizeLinear"} <= kinds) == (scheme == "symmetric")


@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
def test_legacy_fake_quantization_with_moving_average_observer(tmp_path, scheme):
    @flow.global_function()
    def fake_quantization_moving_average():
        x = _variable_x()
        return flow.quantization.fake_quantization(
            x, *flow.quantization.moving_average_min_max_observer(x, quantization_scheme=scheme),
            quantization_scheme=scheme)

    flow.train.CheckPoint().init()
    keys = flow.get_all_variables().keys()
    max_key = next(k for k in keys if k.endswith("max"))
    min_key = next(k for k in keys if k.endswith("min"))
    flow.load_variables({max_key: np.array([0.5], np.float32), min_key: np.array([-0.2], np.float32)})
    flow.checkpoint.save(str(tmp_path / "weights"))
    path = str(tmp_path / "model.onnx")
    flow.onnx.export(fake_quantization_moving_average, str(tmp_path / "weights"), path, opset=10)
    np.testing.assert_allclose(_run(path, {})[0], fake_quantization_moving_average().get().numpy(), rtol=1e-4,
                               atol=1e-5)


# writing the file -----------------------------------------------------------------------------------------------
def _small_job():
    @flow.global_function()
    def dense(x: tp.Numpy.Placeholder((3, 8))) -> tp.Numpy:
        return flow.layers.dense(x, 4, name="small")

    return dense


@pytest.mark.parametrize("external_data", [False, True])
def test_a_full_disk_names_the_file_and_folder_and_leaves_nothing(tmp_path, monkeypatch, external_data):
    import errno

    job = _small_job()
    flow.train.CheckPoint().init()
    flow.checkpoint.save(str(tmp_path / "weights"))
    out = tmp_path / "out"
    out.mkdir()
    real_save = onnx.save_model

    def save_until_the_disk_is_full(model, path, *args, **kwargs):
        real_save(model, path, *args, **kwargs)  # the bytes are there ...
        with open(path, "ab") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")  # ... when the disk fills up

    monkeypatch.setattr(onnx, "save_model", save_until_the_disk_is_full)
    target = out / "model.onnx"
    with pytest.raises(ValueError) as caught:
        flow.onnx.export(job, str(tmp_path / "weights"), str(target), external_data=external_data)
    message = str(caught.value)
    assert repr(str(target)) in message and repr(str(out)) in message and "the disk is full" in message
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOSPC
    assert os.listdir(out) == []  # no partial model, no data file, no scratch folder
    monkeypatch.setattr(onnx, "save_model", real_save)
    flow.onnx.export(job, str(tmp_path / "weights"), str(target), external_data=external_data)  # still usable
    assert onnx.load(str(target)).graph.node


@pytest.mark.slow  # writes and checks 2.1 GiB: tens of seconds, not the few the normal suite allows
def test_external_data_exports_a_model_over_2_gib(tmp_path):
    """A variable of 2.1 GiB (a constant initializer: cheap to make) in a model checked by path."""
    count = 2**29 + 2**25  # float32: 2.125 GiB, over protobuf's 2 GiB

    @flow.global_function()
    def huge(i: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("huge", (count,), initializer=flow.constant_initializer(0.5))
        return flow.gather(w, i)

    flow.train.CheckPoint().init()
    flow.checkpoint.save(str(tmp_path / "weights"))
    flow.clear_default_session()  # the session's copy of the weights goes before the export makes its own
    path = str(tmp_path / "model.onnx")
    flow.onnx.export(huge, str(tmp_path / "weights"), path, external_data=True)
    onnx.checker.check_model(path)
    assert os.path.getsize(path) < 2**20 and os.path.getsize(path + ".data") == 4 * count
    with open(path + ".data", "rb") as f:
        f.seek(4 * (count - 4))
        assert np.array_equal(np.frombuffer(f.read(16), np.float32), np.full(4, 0.5, np.float32))
