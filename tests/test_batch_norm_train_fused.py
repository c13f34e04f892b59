"""flow.layers.batch_normalization in a train job is one fused op (batch_norm_train); it must give
what the composed graph (flow.nn.moments + flow.nn.batch_normalization, differentiated op by op)
gives: outputs, parameter gradients, input gradients and moving statistics, on blobs large enough
for the kernels' blocked, multi-threaded path and on small ones."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
value = _helpers.value


def _train(shape, axis, dtype, fused, x, t, conv=False, relu=False, data_format="NCHW"):
    """One SGD step of loss = sum(bn(x * w) * t); returns y, the gradient reaching w (through x),
    and the variables after the step."""
    flow.clear_default_session()
    rank = len(shape)
    channels = shape[axis]

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(shape, dtype=dtype), t: tp.Numpy.Placeholder(shape, dtype=dtype)) -> tp.Numpy:
        if conv:  # a 3x3 convolution's result: a strided view on the cpu backend
            in_channels = shape[1] if data_format == "NCHW" else shape[3]
            k_shape = (channels, in_channels, 3, 3) if data_format == "NCHW" else (channels, 3, 3, in_channels)
            k = flow.get_variable("w", shape=k_shape, dtype=dtype,
                                  initializer=flow.random_normal_initializer(stddev=0.2, seed=1))
            h = flow.nn.conv2d(x, k, 1, "SAME", data_format=data_format)
        else:
            w = flow.get_variable("w", shape=(1,), dtype=dtype, initializer=flow.ones_initializer())
            h = x * w
        if fused:
            y = flow.layers.batch_normalization(h, axis=axis, momentum=0.9, epsilon=1e-3, name="bn",
                                                gamma_initializer=flow.constant_initializer(1.5),
                                                beta_initializer=flow.constant_initializer(-0.5))
        else:
            axes = [i for i in range(rank) if i != axis % rank]
            mean, var = flow.nn.moments(h, axes, keepdims=True)
            kept = [channels if i == axis % rank else 1 for i in range(rank)]
            gamma = flow.get_variable("bn-gamma", shape=(channels,), dtype=dtype,
                                      initializer=flow.constant_initializer(1.5))
            beta = flow.get_variable("bn-beta", shape=(channels,), dtype=dtype,
                                     initializer=flow.constant_initializer(-0.5))
            y = flow.nn.batch_normalization(h, mean, var, flow.reshape(beta, kept), flow.reshape(gamma, kept),
                                            1e-3, axis=axis)
        if relu:
            y = flow.nn.relu(y)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_sum(y * t))
        return y

    y = job(x, t)
    nodes = job.plan().job.nodes
    ops = [n.op for n in nodes]
    assert ("batch_norm_train" in ops) == fused and ("moments" in ops) != fused
    if fused and relu:  # the fusion pass folds the ReLU and its gradient into the two batch-norm nodes
        assert "relu" not in ops and "relu_grad" not in ops
        assert {n.attrs.get("activation") for n in nodes if n.op.startswith("batch_norm_train")} == {"relu"}
    names = ["w", "bn-gamma", "bn-beta"] + (["bn-moving_mean", "bn-moving_variance"] if fused else [])
    return y, {n: value(n) for n in names}


@pytest.mark.parametrize("shape, axis, dtype", [
    ((4, 64, 24, 24), 1, np.float32),     # 147,456 values: the blocked, threaded path
    ((3, 5, 7), 1, np.float64),
    ((6, 4), -1, np.float32),             # dense: channels last, inner extent 1
    ((2, 9, 9, 3), 3, np.float32),        # NHWC
    ((8, 32, 32, 64), 3, np.float32),     # NHWC, 524,288 values: blocks of rows over the host threads
])
def test_fused_layer_matches_the_composed_graph(shape, axis, dtype):
    rng = np.random.default_rng(11)
    x = (rng.normal(size=shape) * 2.0 + 3.0).astype(dtype)
    t = rng.normal(size=shape).astype(dtype)
    y_fused, fused = _train(shape, axis, dtype, True, x, t)
    y_ref, ref = _train(shape, axis, dtype, False, x, t)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y_fused, y_ref, **tol)
    for name in ("w", "bn-gamma", "bn-beta"):
        np.testing.assert_allclose(fused[name], ref[name], **tol, err_msg=name)
    axes = tuple(i for i in range(len(shape)) if i != axis % len(shape))
    np.testing.assert_allclose(fused["bn-moving_mean"], 0.1 * x.astype(np.float64).mean(axis=axes), **tol)
    np.testing.assert_allclose(fused["bn-moving_variance"], 0.9 + 0.1 * x.astype(np.float64).var(axis=axes), **tol)


def test_fused_forward_keeps_the_two_pass_variance_for_large_means():
    # E[x^2] - E[x]^2 would lose every digit here in float32; centring first keeps them
    shape = (8, 4, 16, 16)
    rng = np.random.default_rng(3)
    x = (1000.0 + rng.normal(size=shape) * 0.01).astype(np.float32)
    t = np.ones(shape, np.float32)
    _, fused = _train(shape, 1, np.float32, True, x, t)
    np.testing.assert_allclose(fused["bn-moving_variance"], 0.9 + 0.1 * x.astype(np.float64).var(axis=(0, 2, 3)),
                               rtol=1e-6)


def test_fused_layer_on_a_convolutions_channels_last_result():
    shape = (4, 24, 40, 40)  # 153,600 values: the threaded, tiled-transpose path
    rng = np.random.default_rng(12)
    x = rng.normal(size=shape).astype(np.float32)
    t = rng.normal(size=shape).astype(np.float32)
    y_fused, fused = _train(shape, 1, np.float32, True, x, t, conv=True)
    y_ref, ref = _train(shape, 1, np.float32, False, x, t, conv=True)
    np.testing.assert_allclose(y_fused, y_ref, rtol=2e-4, atol=2e-4)
    for name in ("w", "bn-gamma", "bn-beta"):
        np.testing.assert_allclose(fused[name], ref[name], rtol=2e-4, atol=2e-4, err_msg=name)


@pytest.mark.parametrize("conv", [False, True])
def test_fused_layer_with_the_relu_folded_in(conv):
    shape = (4, 24, 40, 40)
    rng = np.random.default_rng(13)
    x = rng.normal(size=shape).astype(np.float32)
    t = rng.normal(size=shape).astype(np.float32)
    y_fused, fused = _train(shape, 1, np.float32, True, x, t, conv=conv, relu=True)
    y_ref, ref = _train(shape, 1, np.float32, False, x, t, conv=conv, relu=True)
    assert (y_fused == 0).mean() > 0.2  # the ReLU did cut
    np.testing.assert_allclose(y_fused, y_ref, rtol=2e-4, atol=2e-4)
    for name in ("w", "bn-gamma", "bn-beta"):
        np.testing.assert_allclose(fused[name], ref[name], rtol=2e-4, atol=2e-4, err_msg=name)


def test_fused_layer_channels_last_with_the_relu_folded_in():
    shape = (8, 32, 32, 64)  # NHWC: several blocks of rows, over the host threads
    rng = np.random.default_rng(14)
    x = rng.normal(size=shape).astype(np.float32)
    t = rng.normal(size=shape).astype(np.float32)
    y_fused, fused = _train(shape, 3, np.float32, True, x, t, relu=True)
    y_ref, ref = _train(shape, 3, np.float32, False, x, t, relu=True)
    assert (y_fused == 0).mean() > 0.2
    np.testing.assert_allclose(y_fused, y_ref, rtol=2e-4, atol=2e-4)
    for name in ("w", "bn-gamma", "bn-beta"):
        np.testing.assert_allclose(fused[name], ref[name], rtol=2e-4, atol=2e-4, err_msg=name)


@pytest.mark.parametrize("relu", [False, True])
def test_fused_layer_on_an_nhwc_convolutions_strided_result(relu):
    shape = (4, 40, 40, 24)  # the NHWC convolution's result lies as (H, W, N, C) in memory
    rng = np.random.default_rng(15)
    x = rng.normal(size=shape).astype(np.float32)
    t = rng.normal(size=shape).astype(np.float32)
    y_fused, fused = _train(shape, 3, np.float32, True, x, t, conv=True, relu=relu, data_format="NHWC")
    y_ref, ref = _train(shape, 3, np.float32, False, x, t, conv=True, relu=relu, data_format="NHWC")
    np.testing.assert_allclose(y_fused, y_ref, rtol=2e-4, atol=2e-4)
    for name in ("w", "bn-gamma", "bn-beta"):
        np.testing.assert_allclose(fused[name], ref[name], rtol=2e-4, atol=2e-4, err_msg=name)
