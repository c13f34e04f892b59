"""Legacy function_config.enable_auto_mixed_precision: the auto-mixed-precision pass.

On the CPU backend legacy kept every op in float32 (its rewrite ran for GPU ops only): the option then
warns and changes nothing. FLOWJOB_AMP_ON_CPU=1 runs the float16 set on numpy too, which the tests use to
check the rewrite itself: where the casts go, that training goes through them, and that results stay
close to float32.
"""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError
from flowjob_core.passes.pipeline import PassContext, run_passes
from flowjob_core.testing.modules import sibling
from flowjob_ops.passes.auto_mixed_precision import AutoMixedPrecisionWarning

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
sgd = sibling(__file__, "op_surface_helpers").sgd
IMAGES = np.random.default_rng(0).random((8, 1, 8, 8), dtype=np.float32)
LABELS = np.arange(8, dtype=np.int32) % 4


def config(amp: bool = True) -> flow.FunctionConfig:
    cfg = flow.function_config()
    cfg.enable_auto_mixed_precision(amp)
    return cfg


def define(amp: bool, name: str = "train"):
    @flow.global_function("train", config(amp))
    def train(images: tp.Numpy.Placeholder((8, 1, 8, 8)),
              labels: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.1, seed=1)
        conv = flow.layers.conv2d(images, 4, 3, padding="SAME", kernel_initializer=init, name="conv")
        hidden = flow.nn.relu(conv)
        pooled = flow.nn.max_pool2d(hidden, 2, 2, "VALID")
        flat = flow.reshape(pooled, (8, -1))
        logits = flow.layers.dense(flat, 4, kernel_initializer=init, name="dense")
        loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        sgd(loss)
        return loss

    return train


def test_on_the_cpu_backend_the_option_warns_and_changes_nothing(monkeypatch):
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")  # also where a GPU would be the default device
    flow.clear_default_session()
    plain = [define(False)(IMAGES, LABELS) for _ in range(3)]
    flow.clear_default_session()
    job = define(True)
    with pytest.warns(AutoMixedPrecisionWarning, match="job 'train'.*FLOWJOB_AMP_ON_CPU"):
        first = job(IMAGES, LABELS)
    np.testing.assert_array_equal([first] + [job(IMAGES, LABELS) for _ in range(2)], plain)


def test_the_float16_set_and_its_casts(monkeypatch):
    """conv -> (bias, relu) -> max_pool -> reshape -> matmul run in float16: white ops and the clear and
    gray ops between them; the dense bias_add after the last matmul feeds no white op and stays float32."""
    monkeypatch.setenv("FLOWJOB_AMP_ON_CPU", "1")
    job = define(True)
    job(IMAGES, LABELS)
    graph = job._plan.job
    # autodiff's gradients are handed on beside the job: the planned passes once more, for them
    ctx = PassContext(job.session, job.session.registries, job.session.backend, job.bindings)
    run_passes(job.ensure_traced(), ctx)

    def dtype(op: str) -> np.dtype:  # of the op's first (forward) node
        node = next(n for n in graph.nodes if n.op == op)
        return graph.specs[node.outputs[0]].dtype

    for op in ("conv2d_bias", "max_pool2d", "reshape", "matmul"):  # conv2d_bias: conv, bias and relu fused
        assert dtype(op) == np.float16, str(graph)
    for op in ("bias_add", "sparse_softmax_cross_entropy", "reduce_mean"):
        assert dtype(op) == np.float32, str(graph)
    casts = {n.name: n.inputs[0] for n in graph.nodes if n.op == "cast" and not n.name.endswith("_grad")}
    into = sorted(lbn for name, lbn in casts.items() if name.endswith("-cast_f2h"))
    out_of = sorted(lbn for name, lbn in casts.items() if name.endswith("-cast_h2f"))
    images = graph.placeholders[0].lbn
    assert into == sorted([images, "conv-bias/out", "conv-weight/out", "dense-weight/out"])
    assert out_of == ["dense_matmul/out_0"]
    # trainable variables stay float32 (their float16 copies are the casts); so do their gradients
    for var in graph.variables.values():
        if var.trainable:
            assert var.spec.dtype == np.float32
            assert graph.specs[ctx.variable_grads[var.name]].dtype == np.float32


def test_a_plugin_op_takes_part_by_the_class_its_record_declares(monkeypatch):
    """flowjob-swish's records declare their class (OpDef.compute.amp): bias_add_gelu ("gray") between two GEMMs runs
    in float16 as the built-in gray ops do; swish ("black") stays float32 between the next two."""
    plugin = pytest.importorskip("flowjob_swish")
    monkeypatch.setenv("FLOWJOB_AMP_ON_CPU", "1")
    rng = np.random.default_rng(1)
    x, w, b = rng.random((4, 8), np.float32), rng.random((8, 8), np.float32), np.zeros(8, np.float32)

    @flow.global_function("predict", config())
    def job(x: tp.Numpy.Placeholder((4, 8)), w: tp.Numpy.Placeholder((8, 8)),
            b: tp.Numpy.Placeholder((8,))) -> tp.Numpy:
        hidden = plugin.bias_add_gelu(flow.matmul(x, w), b)
        return flow.matmul(plugin.swish(flow.matmul(hidden, w)), w)

    job(x, w, b)
    graph = job._plan.job
    dtypes = {n.op: graph.specs[n.outputs[0]].dtype for n in graph.nodes}
    assert dtypes["bias_add_gelu"] == np.float16 and dtypes["swish"] == np.float32, str(graph)


def test_training_through_the_casts_stays_close_to_float32(monkeypatch):
    plain_job = define(False)
    plain = [plain_job(IMAGES, LABELS) for _ in range(5)]
    flow.clear_default_session()
    monkeypatch.setenv("FLOWJOB_AMP_ON_CPU", "1")
    job = define(True)
    half = [job(IMAGES, LABELS) for _ in range(5)]
    assert all(h.dtype == np.float32 for h in half)  # the loss is computed outside the float16 set
    np.testing.assert_allclose(half, plain, rtol=2e-2)
    assert half[-1] < half[0]  # the variables learn through the casts' gradients


def test_mixed_precision_needs_the_float32_default_data_type():
    cfg = config()
    cfg.default_data_type(flow.double)

    @flow.global_function("predict", cfg)
    def job(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.matmul(x, x)

    with pytest.raises(ConfigError, match="job 'job': enable_auto_mixed_precision needs default_data_type float32"):
        job(np.ones((2, 2), np.float32))


def test_train_mode_batch_norm_runs_in_float16_between_convolutions(monkeypatch):
    # the fused train-mode op is gray (legacy's normalization was): float16 between the two convolutions,
    # its statistics cast back to float32 for the float32 moving averages
    monkeypatch.setenv("FLOWJOB_AMP_ON_CPU", "1")
    x = np.random.default_rng(1).normal(size=(4, 8, 6, 6)).astype(np.float32)

    def run(amp: bool) -> tuple[list[float], object]:
        flow.clear_default_session()

        @flow.global_function("train", config(amp))
        def job(x: tp.Numpy.Placeholder((4, 8, 6, 6))) -> tp.Numpy:
            init = flow.random_normal_initializer(stddev=0.1, seed=2)
            w1 = flow.get_variable("w1", shape=(8, 8, 3, 3), initializer=init)
            w2 = flow.get_variable("w2", shape=(8, 8, 1, 1), initializer=init)
            h = flow.nn.relu(flow.layers.batch_normalization(flow.nn.conv2d(x, w1, 1, "SAME"), axis=1, name="bn"))
            loss = flow.math.reduce_mean(flow.math.square(flow.nn.conv2d(h, w2, 1, "SAME")))
            sgd(loss)
            return loss

        return [float(job(x)) for _ in range(3)], job.plan().job

    losses, job = run(True)
    ref_losses, _ = run(False)
    dtypes = {n.name: str(job.specs[n.outputs[0]].dtype) for n in job.nodes if n.outputs}
    assert dtypes["bn"] == dtypes["bn_grad"] == "float16"
    assert dtypes["bn-mean-cast_h2f"] == dtypes["bn-variance-cast_h2f"] == "float32"
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-2)
    assert losses[-1] < losses[0]
