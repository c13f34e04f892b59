"""Legacy v0.4 arguments of dropout, clip_by_value, one_hot, bias_add, layers.dense and flow.random,
each checked against numpy (or refused with an error naming the function and argument)."""
from __future__ import annotations

import pathlib
import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
import oneflow as flow
from flowjob_core.testing.modules import sibling

# the ops package's test helpers (these tests use the oneflow face, so they live here, not in
# packages/ops/tests, whose tox env installs flowjob-ops without the face)
# (a path inside that folder: sibling() loads the helper next to it)
OPS_TESTS = str(pathlib.Path(__file__).resolve().parents[1] / "packages" / "ops" / "tests" / "x.py")

run_job = sibling(OPS_TESTS, "jobs").run_job
probe = sibling(OPS_TESTS, "grad_probe")
RNG = np.random.default_rng(6)


# dropout -------------------------------------------------------------------------------
def test_dropout_noise_shape_broadcasts_one_mask_and_the_gradient_uses_it() -> None:
    session = probe.session_with_probe()
    x = RNG.normal(size=(6, 5)).astype(np.float32)

    @probe.job(session)
    def train(a: tp.Numpy.Placeholder((6, 5))) -> tp.Numpy:
        w = fc.get_variable("w", shape=(6, 5), initializer=lambda s, d, r: np.ones(s, d))
        y = flow.nn.dropout(a * w, 0.5, noise_shape=(1, 5), seed=4)
        fc.add_loss(y)
        probe.probe(w, "dw")
        return y

    y = train(x)
    mask = np.where(x != 0, y / x, 0)
    assert np.allclose(mask, mask[:1])  # one draw per column, shared by every row
    assert set(np.round(np.unique(mask), 5)) <= {0.0, 2.0}
    np.testing.assert_allclose(probe.RESULTS["dw"], mask * x, rtol=1e-6)  # d(sum y)/dw = mask * a
    session.close()


@pytest.mark.parametrize("rate", [1.0, -0.1, "0.5"])
def test_dropout_refuses_a_rate_outside_0_1(rate: object) -> None:
    with pytest.raises(fc.OpBuildError, match="dropout rate"):
        run_job(lambda v: flow.nn.dropout(v, rate), np.ones((2, 2), np.float32))


def test_dropout_refuses_a_noise_shape_that_does_not_broadcast() -> None:
    with pytest.raises(fc.OpBuildError, match="noise_shape"):
        run_job(lambda v: flow.nn.dropout(v, 0.5, noise_shape=(3, 1)), np.ones((2, 2), np.float32))


# clip_by_value -------------------------------------------------------------------------
X = np.array([-2.0, -0.5, 0.0, 1.0, 4.0, 7.0], np.float32)


@pytest.mark.parametrize("lo,hi", [(-1.0, 5.0), (0.5, None), (None, 2.0)])
def test_clip_by_value_every_bound_form_and_its_gradient(lo: float | None, hi: float | None) -> None:
    session = probe.session_with_probe()

    @probe.job(session)
    def train(a: tp.Numpy.Placeholder((6,))) -> tp.Numpy:
        w = fc.get_variable("w", shape=(6,), initializer=lambda s, d, r: np.ones(s, d))
        y = flow.clip_by_value(a * w, min_value=lo, max_value=hi)
        fc.add_loss(y)
        probe.probe(w, "dw")
        return y

    np.testing.assert_array_equal(train(X), np.clip(X, lo, hi))
    inside = (X >= (-np.inf if lo is None else lo)) & (X <= (np.inf if hi is None else hi))
    np.testing.assert_array_equal(probe.RESULTS["dw"], X * inside)
    session.close()


def test_clip_by_value_refuses_no_bound_and_has_the_legacy_aliases() -> None:
    with pytest.raises(fc.OpBuildError, match="min_value and max_value"):
        run_job(lambda v: flow.clip_by_value(v), X)
    for alias in (flow.clip, flow.clamp, flow.clip_by_scalar):
        np.testing.assert_array_equal(run_job(lambda v, f=alias: f(v, -1, 5), X), np.clip(X, -1, 5))


def test_clip_by_value_of_an_integer_blob_truncates_fractional_bounds_as_legacy() -> None:
    x = np.array([-3, 0, 1, 2, 5], np.int32)
    out = run_job(lambda v: flow.clip_by_value(v, min_value=-1.7, max_value=3.9), x)
    np.testing.assert_array_equal(out, np.clip(x, -1, 3))
    assert out.dtype == np.int32


# one_hot -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [None, flow.float16, flow.float32, flow.float64, flow.int8, flow.int32,
                                   flow.int64, flow.uint8])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_every_dtype_and_axis(dtype: object, axis: int) -> None:
    idx = np.array([[0, 3, 1], [2, 2, 9]], np.int32)  # 9 is out of range: a row of off_value
    on, off = 7, (0 if dtype is flow.uint8 else -2)
    out = run_job(lambda v: flow.one_hot(v, 4, on_value=on, off_value=off, axis=axis, dtype=dtype), idx)
    ref = np.where(idx[..., None] == np.arange(4), on, off)
    ref = np.moveaxis(ref, -1, axis).astype(np.float32 if dtype is None else np.dtype(dtype))
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


# bias_add ------------------------------------------------------------------------------
@pytest.mark.parametrize("data_format,axis", [(None, 1), ("NCHW", 1), ("NC", 1), ("NHWC", 3), ("NWC", 3)])
def test_bias_add_data_formats(data_format: str | None, axis: int) -> None:
    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b = RNG.normal(size=(x.shape[axis],)).astype(np.float32)
    shape = [1, 1, 1, 1]
    shape[axis] = -1
    out = run_job(lambda v, c: flow.nn.bias_add(v, c, data_format), x, b)
    np.testing.assert_allclose(out, x + b.reshape(shape), rtol=1e-6)


def test_bias_add_refuses_an_unknown_data_format() -> None:
    with pytest.raises(fc.OpBuildError, match="data_format"):
        run_job(lambda v, c: flow.nn.bias_add(v, c, "CHWN"), np.ones((2, 3), np.float32), np.ones(3, np.float32))


# layers.dense --------------------------------------------------------------------------
def _dense_job(**kwargs: object) -> np.ndarray:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return run_job(lambda v: flow.layers.dense(v, 2, kernel_initializer=flow.ones_initializer(),
                                               bias_initializer=flow.constant_initializer(0.5), **kwargs), x)


@pytest.mark.parametrize("md", [None, flow.distribute.broadcast(), flow.distribute.auto(), flow.distribute.split(0)])
def test_dense_accepts_the_legacy_model_distributes(md: object) -> None:
    out = _dense_job(model_distribute=md)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(out, x.sum(1, keepdims=True).repeat(2, 1) + 0.5)


def test_dense_refuses_other_model_distributes_and_activity_regularizer() -> None:
    with pytest.raises(fc.OpBuildError, match="model_distribute"):
        _dense_job(model_distribute=flow.distribute.split(1))
    with pytest.raises(fc.OpBuildError, match="split\\(0\\) needs 2-d"):
        run_job(lambda v: flow.layers.dense(v, 2, model_distribute=flow.distribute.split(0)),
                np.ones((2, 2, 3), np.float32))
    with pytest.raises(fc.OpBuildError, match="activity_regularizer"):
        _dense_job(activity_regularizer=flow.regularizers.l2(0.1))


def test_dense_takes_trainable_name_and_model_distribute_in_legacy_positions() -> None:
    names = []

    def body(v: object) -> object:
        out = flow.layers.dense(v, 2, None, True, None, None, None, None, False, "fc9", flow.distribute.broadcast())
        names.append(out.op_name)
        return out

    run_job(body, np.ones((2, 3), np.float32))
    assert names == ["fc9_bias_add"]


# flow.random ---------------------------------------------------------------------------
def test_bernoulli_draws_0_and_1_by_probability_in_the_asked_dtype() -> None:
    p = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]], np.float32)
    np.testing.assert_array_equal(run_job(lambda v: flow.random.bernoulli(v), p), p)
    out = run_job(lambda v: flow.random.bernoulli(v, seed=1, dtype=flow.int32), np.full((4000,), 0.3, np.float32))
    assert out.dtype == np.int32 and set(np.unique(out)) <= {0, 1} and 0.25 < out.mean() < 0.35


def test_coin_flip_is_int8_batch_size_flips() -> None:
    out = run_job(lambda v: flow.random.CoinFlip(batch_size=3000, seed=2, probability=0.8) + 0 * v[0],
                  np.zeros((1,), np.int8))
    assert out.shape == (3000,) and out.dtype == np.int8 and 0.75 < out.mean() < 0.85


def test_batch_permutation_and_shuffle_permute_the_first_axis() -> None:
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    perm = run_job(lambda v: flow.random.generate_random_batch_permutation_indices(v, seed=5), x)
    assert perm.dtype == np.int32 and sorted(perm.tolist()) == list(range(8))
    out = run_job(lambda v: flow.random.shuffle(v, seed=5), x)
    assert sorted(map(tuple, out.tolist())) == sorted(map(tuple, x.tolist()))  # whole rows move
    np.testing.assert_array_equal(out, x[perm])  # the same seed, the same permutation


def test_random_refuses_bad_arguments() -> None:
    with pytest.raises(fc.OpBuildError, match="probability"):
        run_job(lambda v: flow.random.coin_flip(2, probability=1.5) + 0 * v[0], np.zeros((1,), np.int8))
    with pytest.raises(fc.OpBuildError, match="seed"):
        run_job(lambda v: flow.random.shuffle(v, seed=1.5), np.ones((2, 2), np.float32))
    with pytest.raises(fc.OpBuildError, match="floating probabilities"):
        run_job(lambda v: flow.random.bernoulli(v), np.ones((2,), np.int32))
    seed, has_seed = flow.random.gen_seed()
    assert isinstance(seed, int) and has_seed
