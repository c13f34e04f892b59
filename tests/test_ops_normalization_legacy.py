"""flow.nn.moments, flow.nn.batch_normalization, flow.layers.batch_normalization and flow.layers.layer_norm
with legacy v0.4 arguments, names and defaults, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)


_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd, train_grad = _helpers.fresh_session, _helpers.value, _helpers.sgd, _helpers.train_grad


def test_moments_mean_and_biased_variance():
    x = RNG.normal(size=(3, 4, 5)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 4, 5))) -> tp.Numpy:
        mean, var = flow.nn.moments(x, [0, 2])
        k_mean, k_var = flow.nn.moments(x, [-1], keepdims=True)
        return flow.concat([mean, var, flow.reshape(k_mean, (12,)), flow.reshape(k_var, (12,))], axis=0)

    got = job(x)
    want = np.concatenate([x.mean((0, 2)), x.var((0, 2)), x.mean(-1).ravel(), x.var(-1).ravel()])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_moments_names_and_shapes():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        mean, var = flow.nn.moments(x, [1], keepdims=True, name="stats")
        assert (mean.shape, var.shape) == ((2, 1), (2, 1))
        assert (mean.logical_blob_name, var.logical_blob_name) == ("stats/mean", "stats/variance")
        return mean

    job(np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("axes", [1, None, []])
def test_moments_axes_must_be_a_non_empty_list(axes):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.moments(x, axes)[0]

    with pytest.raises(FlowjobError, match="axes"):
        job(np.zeros((2, 3), np.float32))


def test_nn_batch_normalization_nchw_with_1d_parameters():
    x = RNG.normal(size=(2, 3, 4, 4)).astype(np.float32)
    mean, var = RNG.normal(size=3).astype(np.float32), RNG.uniform(0.5, 2, 3).astype(np.float32)
    offset, scale = RNG.normal(size=3).astype(np.float32), RNG.normal(size=3).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4, 4)), m: tp.Numpy.Placeholder((3,)), v: tp.Numpy.Placeholder((3,)),
            o: tp.Numpy.Placeholder((3,)), s: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.nn.batch_normalization(x, m, v, o, s, variance_epsilon=1e-3)  # legacy axis=1

    c = (1, 3, 1, 1)
    want = (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) * scale.reshape(c) + offset.reshape(c)
    np.testing.assert_allclose(job(x, mean, var, offset, scale), want, rtol=1e-5, atol=1e-5)


def test_nn_batch_normalization_rejects_a_mean_of_the_wrong_length():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3)), m: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.nn.batch_normalization(x, m, m, axis=1)

    with pytest.raises(FlowjobError, match=r"batch_normalization at .*: mean must be 1-D of length x.shape\[1\] = 3"):
        job(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))


def test_nn_batch_normalization_rejects_a_negative_variance_epsilon():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.batch_normalization(x, x, x, variance_epsilon=-1.0)

    with pytest.raises(FlowjobError, match="batch_normalization at .*: variance_epsilon must be a finite number >= 0"):
        job(np.zeros((2, 3), np.float32))


def test_layer_batch_normalization_variables_as_legacy():
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    t = RNG.normal(size=(4, 3)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((4, 3)), t: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, name="bn")
        sgd(flow.math.reduce_sum(y * t))
        return y

    job(x, t)
    store = get_default_session().variables
    assert sorted(n for n in store.names() if n.startswith("bn")) == [
        "bn-beta", "bn-gamma", "bn-moving_mean", "bn-moving_variance"]
    assert [store[n].trainable for n in ("bn-beta", "bn-gamma", "bn-moving_mean", "bn-moving_variance")] == [
        True, True, False, False]
    xhat = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)
    np.testing.assert_allclose(value("bn-gamma"), 1 - 0.1 * (xhat * t).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value("bn-beta"), -0.1 * t.sum(0), rtol=1e-4, atol=1e-5)
    # default momentum 0.99 against the batch's mean and biased variance
    np.testing.assert_allclose(value("bn-moving_mean"), 0.01 * x.mean(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(value("bn-moving_variance"), 0.99 + 0.01 * x.var(0), rtol=1e-6)


def test_layer_batch_normalization_predict_job_uses_the_moving_statistics():
    x = RNG.normal(size=(5, 2, 3)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5, 2, 3))) -> tp.Numpy:
        return flow.layers.batch_normalization(
            x, axis=1, epsilon=0.01, moving_mean_initializer=flow.constant_initializer(0.5),
            moving_variance_initializer=flow.constant_initializer(4.0),
            gamma_initializer=flow.constant_initializer(2.0), beta_initializer=flow.constant_initializer(-1.0))

    np.testing.assert_allclose(job(x), (x - 0.5) / np.sqrt(4.01) * 2.0 - 1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("flags", [{"training": False}, {"trainable": False}])
def test_layer_batch_normalization_not_training_keeps_the_moving_statistics(flags):
    x = RNG.normal(size=(6, 3)).astype(np.float32) + 3.0

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((6, 3))) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, **flags)
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        sgd(flow.math.reduce_sum(y * w))
        return y

    y = job(x)
    np.testing.assert_allclose(y, x / np.sqrt(1.0 + 1e-3), rtol=1e-5)
    np.testing.assert_array_equal(value("BatchNorm-moving_mean"), np.zeros(3))
    np.testing.assert_array_equal(value("BatchNorm-moving_variance"), np.ones(3))


def test_layer_batch_normalization_without_center_and_scale():
    x = RNG.normal(size=(8, 2)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((8, 2))) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, center=False, scale=False, momentum=0.5)
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        sgd(flow.math.reduce_sum(y * w))
        return y

    np.testing.assert_allclose(job(x), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3), rtol=1e-4, atol=1e-5)
    store = get_default_session().variables
    assert "BatchNorm-gamma" not in store and "BatchNorm-beta" not in store
    np.testing.assert_allclose(value("BatchNorm-moving_mean"), 0.5 * x.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value("BatchNorm-moving_variance"), 0.5 + 0.5 * x.var(0), rtol=1e-5)


@pytest.mark.parametrize("kwargs, match", [({"momentum": 1.5}, "momentum"), ({"epsilon": -1.0}, "epsilon"),
                                          ({"axis": 2}, "axis")])
def test_layer_batch_normalization_bad_arguments(kwargs, match):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.batch_normalization(x, **kwargs)

    with pytest.raises(FlowjobError, match=f"flow.layers.batch_normalization.*{match}"):
        job(np.zeros((2, 3), np.float32))


def test_layer_norm_against_numpy():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return flow.layers.layer_norm(x, name="ln")

    mean, var = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    np.testing.assert_allclose(job(x), (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    assert value("ln-gamma").shape == (4,) and value("ln-beta").shape == (4,)


def test_layer_norm_trains_gamma_and_beta_over_the_params_axes():
    x = RNG.normal(size=(4, 3, 2)).astype(np.float32)
    t = RNG.normal(size=(4, 3, 2)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((4, 3, 2)), t: tp.Numpy.Placeholder((4, 3, 2))) -> tp.Numpy:
        y = flow.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=1, epsilon=1e-3)
        loss = flow.math.reduce_sum(y * t)
        sgd(loss)
        return y

    y = job(x, t)
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(y, xhat, rtol=1e-4, atol=1e-5)
    # the loss is a sum over the batch: the optimizer's gradient is scaled by 1 / (loss elements) = 1
    np.testing.assert_allclose(value("LayerNorm-gamma"), 1 - 0.1 * (xhat * t).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value("LayerNorm-beta"), -0.1 * t.sum(0), rtol=1e-4, atol=1e-5)


def test_layer_norm_without_parameters_creates_no_variables():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 5))) -> tp.Numpy:
        return flow.layers.layer_norm(x, center=False, scale=False)

    x = RNG.normal(size=(2, 5)).astype(np.float32)
    np.testing.assert_allclose(job(x), (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5),
                               rtol=1e-4, atol=1e-5)
    store = get_default_session().variables
    assert "LayerNorm-gamma" not in store and "LayerNorm-beta" not in store


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


def test_layer_norm_grad_agrees_with_the_gradient_of_nn_layer_norm():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    w = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    _, want = train_grad((2, 3, 4), lambda v, w: flow.nn.layer_norm(v, begin_norm_axis=1) * w, x, w)
    flow.clear_default_session()
    mean = x.mean((1, 2))
    inv = 1 / np.sqrt(x.var((1, 2)) + 1e-5)

    @flow.global_function()
    def job(dy: tp.Numpy.Placeholder((2, 3, 4)), x: tp.Numpy.Placeholder((2, 3, 4)), m: tp.Numpy.Placeholder((2,)),
            r: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.layers.layer_norm_grad(dy, x, m, r, begin_norm_axis=1)

    np.testing.assert_allclose(job(w, x, mean.astype(np.float32), inv.astype(np.float32)), want, rtol=1e-4,
                               atol=1e-5)


def test_layer_norm_param_grad():
    dy = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    norm = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    gamma = RNG.normal(size=(4,)).astype(np.float32)

    @flow.global_function()
    def job(dy: tp.Numpy.Placeholder((2, 3, 4)), n: tp.Numpy.Placeholder((2, 3, 4)),
            g: tp.Numpy.Placeholder((4,))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return flow.layers.layer_norm_param_grad(dy, n, g)  # begin_params_axis=-1: the last axis

    nd, beta, gam = job(dy, norm, gamma)
    np.testing.assert_allclose(nd, dy * gamma, rtol=1e-6)
    np.testing.assert_allclose(beta, dy.sum((0, 1)), rtol=1e-5)
    np.testing.assert_allclose(gam, (dy * norm).sum((0, 1)), rtol=1e-5)
