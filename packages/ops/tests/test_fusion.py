"""The fusion pass (flowjob_ops.passes.fuse_conv): fused jobs give the unfused job's losses and gradients
within float32 tolerance, fused kernels match their unfused chains, and a value a fusion would
swallow stays observable (a probe or fetch of it turns that fusion off)."""

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import activations, bias_add, initializers, layers
from flowjob_ops.api import conv as conv_api
from flowjob_ops.api import losses as losses_api
from flowjob_ops.api import pool as pool_api
from flowjob_ops.passes import fuse_conv
from flowjob_ops.api.array import reshape
from flowjob_ops.kernels.conv2d_bias_pool import Conv2dBiasPool
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.overrides.cpu import pool_plane_layout as pool
from flowjob_core.testing.modules import sibling


probe = sibling(__file__, "grad_probe")
N = 4
VARIABLES = ("conv1-weight", "conv1-bias", "conv2-weight", "conv2-bias", "dense-weight", "dense-bias")


def _net_job(session: Any, fmt: str, watch: str | None = None) -> Any:
    shape = (N, 2, 12, 12) if fmt == "NCHW" else (N, 12, 12, 2)

    @probe.job(session)
    def train_job(images: tp.Numpy.Placeholder(shape), labels: tp.Numpy.Placeholder((N,), dtype=np.int32)) -> tp.Numpy:
        init = initializers.random_normal_initializer(stddev=0.3)
        # conv -> bias -> relu (fused whole), pool; conv -> bias, separate relu (fused whole too)
        a1 = layers.conv2d(images, 6, 3, padding="SAME", data_format=fmt, activation=activations.relu, name="conv1",
                           kernel_initializer=init, bias_initializer=init)
        p1 = pool_api.max_pool2d(a1, 2, 2, "SAME", data_format=fmt, name="pool1")
        z2 = layers.conv2d(p1, 8, 3, padding="VALID", data_format=fmt, name="conv2", kernel_initializer=init,
                           bias_initializer=init)
        a2 = activations.relu(z2, name="relu2")
        p2 = pool_api.max_pool2d(a2, 2, 2, "VALID", data_format=fmt, name="pool2")
        logits = layers.dense(reshape(p2, [N, -1]), 5, kernel_initializer=init, name="dense")
        loss = losses_api.sparse_softmax_cross_entropy_with_logits(labels, logits)
        fc.add_loss(loss)
        kernel = (lambda f, c: (f, c, 3, 3)) if fmt == "NCHW" else (lambda f, c: (f, 3, 3, c))
        shapes = {"conv1-weight": kernel(6, 2), "conv1-bias": (6,), "conv2-weight": kernel(8, 6), "conv2-bias": (8,),
                  "dense-weight": (5, 32), "dense-bias": (5,)}
        for name in VARIABLES:  # the same name gives the layer's variable
            probe.probe(fc.get_variable(name, shape=shapes[name]), name)
        probe.probe(images, "images")
        if watch == "pre-activation":
            probe.probe(z2, "watched", diff=False)
        elif watch == "pool-grad":
            probe.probe(a1, "watched")  # the raw gradient of a1 is max_pool2d_grad's output
        return loss

    return train_job


def _run(fmt: str, fused: bool, monkeypatch: pytest.MonkeyPatch, watch: str | None = None,
         steps: int = 1) -> tuple[list[np.ndarray], dict[str, np.ndarray], Any]:
    monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
    rng = np.random.default_rng(7)
    shape = (N, 2, 12, 12) if fmt == "NCHW" else (N, 12, 12, 2)
    images = rng.standard_normal(shape).astype(np.float32)
    labels = rng.integers(0, 5, N).astype(np.int32)
    session = probe.session_with_probe()
    try:
        job = _net_job(session, fmt, watch)
        losses = []
        for _ in range(steps):
            probe.RESULTS.clear()
            losses.append(np.array(job(images, labels), copy=True))
        ops = [n.op for n in job.plan().order]
        return losses, dict(probe.RESULTS), ops
    finally:
        session.close()


def _close(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5 * max(1.0, float(np.abs(b).max())))


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_fused_job_gives_the_unfused_losses_and_gradients(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    losses, grads, ops = _run(fmt, True, monkeypatch)
    ref_losses, ref_grads, ref_ops = _run(fmt, False, monkeypatch)
    assert ops.count("conv2d_bias") == 2 and "conv2d" not in ops and "bias_add" not in ops[:ops.index("matmul")]
    assert ops.count("max_pool2d_relu_grad") == 2 and "max_pool2d_grad" not in ops
    assert ref_ops.count("conv2d") == 2 and "conv2d_bias" not in ref_ops
    for got, want in zip(losses, ref_losses):
        _close(got, want)
    assert set(grads) == set(ref_grads) == set(VARIABLES) | {"images"}
    for key in grads:
        _close(grads[key], ref_grads[key])


@pytest.mark.parametrize("watch", ["pre-activation", "pool-grad"])
def test_a_watched_intermediate_turns_its_fusion_off(watch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    losses, grads, ops = _run("NCHW", True, monkeypatch, watch)
    _, ref_grads, _ = _run("NCHW", False, monkeypatch, watch)
    if watch == "pre-activation":  # conv2 -> bias_add still fuses, its relu stays to keep z2
        assert ops.count("conv2d_bias") == 2 and "relu" in ops
    else:  # pool1's gradient stays a value of its own; pool2's still fuses
        assert ops.count("max_pool2d_grad") == 1 and ops.count("max_pool2d_relu_grad") == 1
    for key in ref_grads:
        _close(grads[key], ref_grads[key])


def test_fusion_keeps_returned_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)

    @fc.global_function()
    def job(images: tp.Numpy.Placeholder((2, 3, 6, 6))) -> tuple[tp.Numpy, tp.Numpy]:
        w = fc.get_variable("w", shape=(4, 3, 3, 3), initializer=initializers.random_normal_initializer())
        b = fc.get_variable("b", shape=(4,), initializer=initializers.constant_initializer(0.25))
        c = conv_api.conv2d(images, w, 1, "SAME")
        return c, activations.relu(bias_add.bias_add(c, b))

    c, a = job(x)
    assert [n.op for n in job.plan().order if n.op in ("conv2d", "conv2d_bias", "bias_add", "relu")] == [
        "conv2d", "bias_add", "relu"]
    np.testing.assert_allclose(a, np.maximum(c + np.float32(0.25), 0), rtol=1e-6)


# kernels -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", [
    ((8, 1, 12, 12), (6, 1, 5, 5), 1, "SAME", 1),  # C=1: "cols", bias inside the GEMM
    ((3, 8, 7, 7), (16, 8, 3, 3), 1, "SAME", 1),  # "rows"
    ((2, 4, 9, 9), (6, 2, 3, 3), 2, "VALID", 2),  # groups, strides
])
@pytest.mark.parametrize("strategy", [None, "rows", "cols"])
def test_conv_bias_relu_kernel_matches_the_chain(fmt: str, geometry: tuple, strategy: Any) -> None:
    (x_shape, w_shape, strides, pads, groups) = geometry
    rng = np.random.default_rng(1)
    if fmt == "NHWC":
        x_shape = (x_shape[0], x_shape[2], x_shape[3], x_shape[1])
        w_shape = (w_shape[0], w_shape[2], w_shape[3], w_shape[1])
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    plain = Conv2dForward(np, ConvGeometry.create(x_shape, w_shape, strides, pads, 1, groups, fmt),
                          np.float32, strategy=strategy)
    z = plain(x, w) + (b[:, None, None] if fmt == "NCHW" else b)
    for relu in (False, True):
        fused = Conv2dForward(np, ConvGeometry.create(x_shape, w_shape, strides, pads, 1, groups, fmt),
                              np.float32, strategy=strategy, bias=True, relu=relu)
        for _ in range(2):  # the second call reuses every buffer
            got = fused(x, w, b)
        want = np.maximum(z, 0) if relu else z
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(z).max()))
    with pytest.raises(ValueError, match="bias"):
        fused(x, w)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("ksize, strides, pads", [(2, 2, "SAME"), (3, 2, "SAME"), (2, 1, "VALID")])
def test_pool_relu_grad_equals_relu_grad_of_pool_grad(fmt: str, ksize: int, strides: int, pads: str) -> None:
    rng = np.random.default_rng(2)
    shape = (2, 3, 9, 9) if fmt == "NCHW" else (2, 9, 9, 3)
    x = np.maximum(rng.standard_normal(shape).astype(np.float32), 0)  # a relu output: many ties at 0
    y = pool.MaxPool2d(np, shape, np.float32, ksize, strides, pads, fmt)(x).copy()
    dy = rng.standard_normal(y.shape).astype(np.float32)
    want = pool.MaxPool2dBackward(np, shape, np.float32, ksize, strides, pads, fmt)(x, y, dy) * (x > 0)
    backward = pool.MaxPool2dBackward(np, shape, np.float32, ksize, strides, pads, fmt)
    got = backward(x, y, dy * (y > 0))
    np.testing.assert_array_equal(got, want)


def test_fusion_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWJOB_FUSION", "0")
    assert not fuse_conv.enabled()
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    assert fuse_conv.enabled()


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_predict_job_pools_from_the_convolution(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shape = (N, 2, 12, 12) if fmt == "NCHW" else (N, 12, 12, 2)  # pool 1 tiles, pool 2 overlaps
    images = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()

        @fc.global_function()
        def infer(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
            init = initializers.random_normal_initializer(stddev=0.3)
            a = layers.conv2d(x, 6, 3, padding="SAME", data_format=fmt, activation=activations.relu, name="c1",
                              kernel_initializer=init, bias_initializer=init)
            p = pool_api.max_pool2d(a, 2, 2, "SAME", data_format=fmt)
            z = layers.conv2d(p, 4, 2, padding="VALID", data_format=fmt, name="c2", kernel_initializer=init,
                              bias_initializer=init)  # no activation
            return pool_api.max_pool2d(z, 3, 1, "VALID", data_format=fmt)

        results[fused] = (infer(images), [n.op for n in infer.plan().order])
    (got, ops), (want, ref_ops) = results[True], results[False]
    assert ops.count("conv2d_bias_pool") == 2 and "max_pool2d" not in ops
    assert ref_ops.count("max_pool2d") == 2 and "conv2d_bias_pool" not in ref_ops
    _close(got, want)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("strategy", ["rows", "cols"])
@pytest.mark.parametrize("size, pool_args", [
    (9, (2, 2, "SAME")), (9, (3, 1, "VALID")), (9, ((2, 3), 2, ((1, 0), (0, 1)))),
    (8, (2, 2, "SAME")), (12, ((2, 3), (2, 3), "VALID")),  # windows tile the plane: tile-ordered GEMM
])
def test_conv_bias_pool_kernel_matches_the_chain(fmt: str, strategy: str, size: int, pool_args: tuple) -> None:
    rng = np.random.default_rng(4)
    x_shape, w_shape = ((3, 4, size, size), (5, 4, 3, 3)) if fmt == "NCHW" else ((3, size, size, 4), (5, 3, 3, 4))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for relu in (False, True):
        chain = Conv2dForward(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, fmt),
                              np.float32, strategy=strategy, bias=True, relu=relu)
        a = chain(x, w, b)
        want = pool.MaxPool2d(np, a.shape, np.float32, *pool_args, fmt)(a)
        fused = Conv2dBiasPool(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, fmt),
                               np.float32, pool=pool_args, relu=relu, strategy=strategy)
        assert fused._tiled == (size != 9)
        got = fused(x, w, b)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
