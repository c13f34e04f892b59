"""Leftover legacy v0.4 names against numpy: flow.nn.layer_norm, flow.layers.prelu,
flow.layers.batch_normalization_relu / _add_relu, flow.nn.tril / fused_scale_tril, flow.nn.random_mask_like,
and the reflected blob operators ``2 % x`` and ``2.0 ** x``."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(11)


_helpers = sibling(__file__, "legacy_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


# flow.nn.tril / fused_scale_tril ----------------------------------------------------------
def test_nn_exports_the_math_triangles():
    # legacy exported one function under both names
    assert flow.nn.tril is flow.math.tril
    assert flow.nn.fused_scale_tril is flow.math.fused_scale_tril
    x = RNG.normal(size=(2, 3, 3)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 3))) -> tp.Numpy:
        return flow.nn.fused_scale_tril(x, diagonal=-1, fill_value=5, scale=2.0) + flow.nn.tril(x)

    np.testing.assert_allclose(job(x), np.where(np.tril(np.ones((3, 3)), -1) > 0, 2 * x, 5) + np.tril(x), rtol=1e-6)


# flow.nn.layer_norm -----------------------------------------------------------------------
def _layer_norm(x, gamma, beta, norm_axis, params_axis, eps):
    axes = tuple(range(norm_axis % x.ndim, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    nd = (1,) * (params_axis % x.ndim) + x.shape[params_axis:]
    if gamma is not None:
        y = y * gamma.reshape(nd)
    if beta is not None:
        y = y + beta.reshape(nd)
    return y


def test_nn_layer_norm_defaults_without_parameters():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        y = flow.nn.layer_norm(x)
        assert y.op_name.startswith("LayerNorm_")
        return y

    np.testing.assert_allclose(job(x), _layer_norm(x, None, None, 1, -1, 1e-5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_axis, params_axis", [(1, -1), (-1, -1), (2, 1), (1, 2)])
def test_nn_layer_norm_with_gamma_and_beta(norm_axis, params_axis):
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    pshape = x.shape[params_axis:]
    gamma = RNG.normal(size=pshape).astype(np.float32)
    beta = RNG.normal(size=pshape).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4)), g: tp.Numpy.Placeholder(pshape),
            b: tp.Numpy.Placeholder(pshape)) -> tp.Numpy:
        return flow.nn.layer_norm(x, g, b, begin_norm_axis=norm_axis, begin_params_axis=params_axis,
                                  epsilon=1e-3, name="ln")

    want = _layer_norm(x, gamma, beta, norm_axis, params_axis, 1e-3)
    np.testing.assert_allclose(job(x, gamma, beta), want, rtol=1e-4, atol=1e-5)


def test_nn_layer_norm_gradient_reaches_gamma_and_beta():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    t = RNG.normal(size=(3, 4)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3, 4)), t: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        g = flow.get_variable("g", shape=(4,), initializer=flow.ones_initializer())
        b = flow.get_variable("b", shape=(4,), initializer=flow.zeros_initializer())
        y = flow.nn.layer_norm(x, g, b)
        sgd(flow.math.reduce_sum(y * t))
        return y

    job(x, t)
    xhat = _layer_norm(x, None, None, 1, -1, 1e-5)
    np.testing.assert_allclose(value("g"), 1 - 0.1 * (xhat * t).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value("b"), -0.1 * t.sum(0), rtol=1e-5, atol=1e-6)


def test_nn_layer_norm_rejects_a_gamma_of_the_wrong_size():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3)), g: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.nn.layer_norm(x, gamma=g)

    with pytest.raises(FlowjobError, match=r"layer_norm at .*: gamma must hold inputs.shape\[-1:\] = \(3,\)"):
        job(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))


def test_nn_layer_norm_rejects_an_axis_out_of_range():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.layer_norm(x, begin_norm_axis=2)

    with pytest.raises(FlowjobError, match="layer_norm at .*: begin_norm_axis must be an int in"):
        job(np.zeros((2, 3), np.float32))


# flow.layers.prelu ------------------------------------------------------------------------
def test_prelu_defaults_start_as_relu_with_one_alpha_per_element():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        y = flow.layers.prelu(x)
        assert y.op_name == "PRelu"
        return y

    np.testing.assert_array_equal(job(x), np.maximum(x, 0))
    assert value("PRelu-alpha").shape == (3, 4)
    assert get_default_session().variables["PRelu-alpha"].trainable


def test_prelu_shared_axes_values_and_alpha_update():
    x = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)
    t = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((2, 3, 2, 2)), t: tp.Numpy.Placeholder((2, 3, 2, 2))) -> tp.Numpy:
        y = flow.layers.prelu(x, alpha_initializer=flow.constant_initializer(0.25), shared_axes=[2, 3],
                              name="p1")
        sgd(flow.math.reduce_sum(y * t))
        return y

    y = job(x, t)
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    # d loss / d alpha[c] = sum over the batch and the shared axes of t * x where x <= 0
    grad = np.where(x > 0, 0.0, t * x).sum(axis=(0, 2, 3)).reshape(3, 1, 1)
    np.testing.assert_allclose(value("p1-alpha"), 0.25 - 0.1 * grad, rtol=1e-5, atol=1e-6)


def test_prelu_gradient_of_x():
    x = np.array([[-2.0, -0.5, 0.5, 3.0]], np.float32)
    got = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(1, 4), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = flow.layers.prelu(xv, alpha_initializer=flow.constant_initializer(0.5), trainable=False)
        sgd(flow.math.reduce_sum(y * 3.0))
        return y

    job(x)
    flow.sync_default_session()
    np.testing.assert_allclose(got["dx"], [[1.5, 1.5, 3.0, 3.0]])
    np.testing.assert_array_equal(value("PRelu-alpha"), np.full((4,), 0.5, np.float32))


@pytest.mark.parametrize("axes", [[0], [3], "2"])
def test_prelu_rejects_bad_shared_axes(axes):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return flow.layers.prelu(x, shared_axes=axes)

    with pytest.raises(FlowjobError, match="prelu at .*: shared_axes must"):
        job(np.zeros((2, 3, 4), np.float32))


# flow.layers.batch_normalization_relu / _add_relu ---------------------------------------
def test_batch_normalization_add_relu_train_step_as_legacy():
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    a = RNG.normal(size=(4, 3)).astype(np.float32)
    t = RNG.normal(size=(4, 3)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((4, 3)), a: tp.Numpy.Placeholder((4, 3)),
            t: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        y = flow.layers.batch_normalization_add_relu(x, a, name="bn", gamma_name="my_gamma")
        assert y.op_name.startswith("BatchNormAddRelu-Relu_")
        sgd(flow.math.reduce_sum(y * t))
        return y

    y = job(x, a, t)
    xhat = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)
    np.testing.assert_allclose(y, np.maximum(xhat + a, 0), rtol=1e-4, atol=1e-5)
    names = sorted(n for n in get_default_session().variables.names() if "bn" in n or "gamma" in n)
    assert names == ["bn-beta", "bn-moving_mean", "bn-moving_variance", "my_gamma"]
    live = (xhat + a > 0) * t  # the relu passes the gradient where its input is positive
    np.testing.assert_allclose(value("my_gamma"), 1 - 0.1 * (live * xhat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value("bn-beta"), -0.1 * live.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value("bn-moving_mean"), 0.01 * x.mean(0), rtol=1e-5, atol=1e-7)


def test_batch_normalization_relu_predict_uses_moving_statistics():
    x = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 2, 2))) -> tp.Numpy:
        return flow.layers.batch_normalization_relu(x, axis=1, epsilon=0.5, name="bnr")

    # fresh moving statistics: mean 0, variance 1
    np.testing.assert_allclose(job(x), np.maximum(x / np.sqrt(1.5), 0), rtol=1e-6)
    assert value("bnr-moving_variance").shape == (3,)


def test_batch_normalization_add_relu_rejects_an_addend_of_another_shape():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3)), a: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
        return flow.layers.batch_normalization_add_relu(x, a)

    with pytest.raises(FlowjobError, match=r"batch_normalization_add_relu at .*: addend must be like inputs"):
        job(np.zeros((2, 3), np.float32), np.zeros((1, 3), np.float32))


# flow.nn.random_mask_like -----------------------------------------------------------------
def test_random_mask_like_int8_fresh_each_step_and_seeded():
    like = np.zeros((64, 64), np.float32)

    def make(seed):
        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((64, 64))) -> tp.Numpy:
            m = flow.nn.random_mask_like(x, 0.25, seed=seed)
            assert (m.shape, m.dtype, m.op_name.startswith("RandomMaskLike_")) == ((64, 64), np.int8, True)
            return m

        return job

    first, second = make(3), make(3)
    a, b = first(like), first(like)
    assert a.dtype == np.int8 and set(np.unique(a)) <= {0, 1}
    assert abs(a.mean() - 0.75) < 0.03  # kept with probability 1 - rate
    assert not np.array_equal(a, b)  # a new mask every step
    np.testing.assert_array_equal(second(like), a)  # the same seed repeats the sequence


@pytest.mark.parametrize("kwargs, match", [
    ({"rate": 1.0}, "rate must be a number in"),
    ({"rate": -0.1}, "rate must be a number in"),
    ({"rate": 0.5, "noise_shape": [2, 1]}, "noise_shape must be None"),
])
def test_random_mask_like_rejects_bad_arguments(kwargs, match):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.random_mask_like(x, **kwargs)

    with pytest.raises(FlowjobError, match=f"random_mask_like at .*: {match}"):
        job(np.zeros((2, 3), np.float32))


# reflected operators ----------------------------------------------------------------------
def test_reflected_mod_and_pow():
    x = np.array([1.5, 2.0, 3.0, -4.0], np.float32)
    n = np.array([3, -3, 4, 5], np.int32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,)), n: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        return flow.concat([2.0 ** x, 7.0 % x, flow.cast(10 % n, flow.float32)], axis=0)

    got = job(x, n)
    want = np.concatenate([2.0 ** x, np.mod(np.float32(7.0), x), np.mod(10, n).astype(np.float32)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_reflected_pow_gradient():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    got = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(3,), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = 2.0 ** xv
        sgd(flow.math.reduce_sum(y))
        return y

    job(x)
    flow.sync_default_session()
    np.testing.assert_allclose(got["dx"], np.log(2.0) * 2.0 ** x, rtol=1e-5)
