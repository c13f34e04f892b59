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


_helpers = sibling(__file__, "legacy_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


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
