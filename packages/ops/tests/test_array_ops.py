"""The top-level array functions (flow.reshape, flow.concat, ...) through real global functions."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import array, constants, indexing, math, reduce
from flowjob_core.testing.modules import sibling


run_job = sibling(__file__, "jobs").run_job
RNG = np.random.default_rng(5)


X = RNG.normal(size=(2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("fn, want", [
    (lambda x: array.reshape(x, [x.shape[0], -1]), X.reshape(2, 12)),
    (lambda x: array.reshape(x, (4, 3, 2)), X.reshape(4, 3, 2)),
    (lambda x: array.flatten(x, start_dim=1), X.reshape(2, 12)),
    (lambda x: array.expand_dims(x, -1), X[..., None]),
    (lambda x: array.squeeze(array.expand_dims(x, 1), axis=[1]), X),
    (lambda x: array.transpose(x), X.transpose()),
    (lambda x: array.transpose(x, perm=[1, 0, 2]), X.transpose(1, 0, 2)),
    (lambda x: array.concat([x, x * 2], axis=1), np.concatenate([X, X * 2], axis=1)),
    (lambda x: array.identity(x), X),
    (lambda x: array.cast(x, np.int32), X.astype(np.int32)),
    (lambda x: constants.ones_like(x), np.ones_like(X)),
    (lambda x: constants.zeros_like(x), np.zeros_like(X)),
    (lambda x: constants.constant_like(x, 7), np.full_like(X, 7)),
    (lambda x: indexing.slice(x, [None, 1, 0], [None, 2, -1]), X[:, 1:3, :]),
    (lambda x: indexing.where(array.cast(x, np.int32), x, constants.zeros_like(x)), np.where(X.astype(np.int32) != 0,
                                                                                             X, 0)),
    (lambda x: math.clip_by_value(x, -0.5, 0.5), np.clip(X, -0.5, 0.5)),
    (lambda x: reduce.argmax(x), X.argmax(-1).astype(np.int32)),
    (lambda x: array.broadcast_like(constants.constant([1.0, 2.0, 3.0, 4.0]), x), np.broadcast_to([1, 2, 3, 4],
                                                                                                  X.shape)),
    (lambda x: array.broadcast_like(constants.constant([1.0, 2.0]), x, broadcast_axes=[1, 2]),
     np.broadcast_to(np.array([1.0, 2.0])[:, None, None], X.shape)),
    (lambda x: x + constants.constant(1.5, shape=(3, 1)), X + 1.5),
])
def test_array_functions(fn: Any, want: np.ndarray) -> None:
    got = run_job(fn, X)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_gather_and_one_hot() -> None:
    params = RNG.normal(size=(5, 3))
    indices = np.array([[4, 0], [-1, 2]], np.int64)
    np.testing.assert_allclose(run_job(indexing.gather, params, indices), params[indices])
    np.testing.assert_allclose(run_job(lambda p, i: indexing.gather(p, i[0], axis=1), params, np.array([[2, 0]])),
                               params[:, [2, 0]])
    labels = np.array([1, 0, 3], np.int32)
    np.testing.assert_array_equal(run_job(lambda i: indexing.one_hot(i, depth=4), labels),
                                  np.eye(4, dtype=np.float32)[labels])


def test_cast_between_floats_keeps_values() -> None:
    x = RNG.normal(size=(3,))
    got = run_job(lambda a: array.cast(a, "float32"), x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float32))


def test_random_ops_are_fresh_every_step_and_repeatable_by_seed() -> None:
    @fc.global_function()
    def draw(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        return constants.random_uniform((1000,), minval=2.0, maxval=4.0, seed=5) + constants.random_normal((1000,),
                                                                                                           0.0, 0.0) * x

    first, second = draw(np.zeros(1, np.float32)), draw(np.zeros(1, np.float32))
    assert first.dtype == np.float32 and 2.0 <= first.min() and first.max() < 4.0
    assert not np.array_equal(first, second)
    np.testing.assert_allclose(first, np.random.default_rng(5).random(1000, dtype=np.float32) * 2 + 2)


def test_reshape_is_a_view_and_names_follow_their_own_prefix() -> None:
    names = {}

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        names["reshape"] = array.reshape(x, (3, 2)).lbn
        names["expand"] = array.expand_dims(x, 0).lbn
        names["squeeze"] = array.squeeze(array.expand_dims(x, 0, name="e")).lbn
        return x

    job(np.zeros((2, 3), np.float32))
    assert names["reshape"].startswith("Reshape_")
    assert names["expand"].startswith("ExpandDims_")
    assert names["squeeze"].startswith("Squeeze_")
    from flowjob_core import Session

    assert Session().registries.ops["reshape"].effects.view


@pytest.mark.parametrize("body, pattern", [
    (lambda x: array.reshape(x, (5, -1)), r"cannot reshape \(2, 3, 4\) \(24 elements\) to \(5, -1\)"),
    (lambda x: array.reshape(x, (7, 2)), r"cannot reshape \(2, 3, 4\) \(24 elements\) to \(7, 2\) \(14 elements\)"),
    (lambda x: array.reshape(x, (-1, -1)), r"at most one -1"),
    (lambda x: array.transpose(x, [0, 0, 1]), r"perm \(0, 0, 1\) is not a permutation"),
    (lambda x: array.concat([x, array.transpose(x)], axis=0),
     r"shapes \(2, 3, 4\) and \(4, 3, 2\) differ off that axis"),
    # legacy cuts a box running past the end (begin 3, size 2 keeps 1), but a size above the axis is an error
    (lambda x: indexing.slice(x, [0, 0, 3], [None, None, 5]), r"slice size 5 at begin 3 does not fit axis 2 of size 4"),
    (lambda x: array.cast(x, "complex"), r"unknown dtype name"),
])
def test_bad_arguments(body: Any, pattern: str) -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return body(x)

    with pytest.raises((fc.OpBuildError, TypeError), match=pattern):
        job(X)


def test_blob_indexing_with_ints_and_slices() -> None:
    np.testing.assert_allclose(run_job(lambda x: x[1], X), X[1])
    np.testing.assert_allclose(run_job(lambda x: x[:, 1:3], X), X[:, 1:3])
    np.testing.assert_allclose(run_job(lambda x: x[-1, :, 2], X), X[-1, :, 2])

    @fc.global_function()
    def stepped(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return x[::2]

    with pytest.raises(TypeError, match=r"ints and step-1 slices only"):
        stepped(X)


def test_checks_made_by_the_public_functions_also_name_the_job_and_line() -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return array.squeeze(x, axis=1)

    with pytest.raises(fc.OpBuildError, match=r"job 'job', flow.squeeze at .*test_array_ops.py:\d+: axis 1 of shape "
                                              r"\(2, 3, 4\) does not have size 1"):
        job(X)
