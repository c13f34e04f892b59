"""The legacy layout and indexing functions through real global functions, and two shape fixes:
broadcast_like with x already of like's rank, and squeeze keeping (1,) like legacy."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.testing import check_grads
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import array, constants, indexing, math, padding, reduce

run_job = sibling(__file__, "jobs").run_job
probe = sibling(__file__, "grad_probe")
RNG = np.random.default_rng(11)
X = RNG.normal(size=(3, 4)).astype(np.float32)


# broadcast_like (legacy example: x (3, 1), like (3, 3), broadcast_axes=(1,)) -------------------
def test_broadcast_like_with_the_broadcast_axis_kept_as_one_has_a_gradient() -> None:
    session = probe.session_with_probe()
    try:
        @probe.job(session)
        def train(x: tp.Numpy.Placeholder((3, 1))) -> tp.Numpy:
            like = constants.constant(1.0, shape=(3, 3))
            y = array.broadcast_like(x, like, broadcast_axes=(1,))
            fc.add_loss(reduce.reduce_sum(math.multiply(y, y)))
            probe.probe(x, "x")
            return y

        x = np.array([[1.0], [2.0], [-3.0]], np.float32)
        probe.RESULTS.clear()
        np.testing.assert_array_equal(train(x), np.broadcast_to(x, (3, 3)))
        np.testing.assert_allclose(probe.RESULTS["x"], 2 * 3 * x)  # d/dx sum over 3 copies of x^2
    finally:
        session.close()


def test_broadcast_like_still_takes_x_without_the_broadcast_axes() -> None:
    x = RNG.normal(size=(3, 2)).astype(np.float32)
    got = run_job(lambda a: array.broadcast_like(a, constants.constant(0.0, shape=(3, 4, 2)), broadcast_axes=[1]), x)
    np.testing.assert_array_equal(got, np.broadcast_to(x[:, None, :], (3, 4, 2)))


def test_broadcast_to_gradient_kit_and_a_target_the_input_would_outgrow() -> None:
    check_grads("broadcast_to", [RNG.normal(size=(3, 1))], {"shape": (3, 3)})
    with pytest.raises(fc.OpBuildError, match=r"cannot broadcast \(3, 1, 1\) to \(3, 3\)"):
        run_job(lambda a: fc.apply("broadcast_to", [array.reshape(a, (3, 1, 1))], {"shape": (3, 3)}),
                np.zeros((3, 1), np.float32))
    with pytest.raises(fc.OpBuildError, match="broadcast_axes"):
        run_job(lambda a: array.broadcast_like(a, constants.constant(0.0, shape=(3, 3)), broadcast_axes=[2]),
                np.zeros((3, 1), np.float32))


# squeeze: legacy's shape rule keeps (1,) ----------------------------------------------------
@pytest.mark.parametrize("shape, axis, want", [
    ((1, 1), None, (1,)),
    ((1,), [0], (1,)),
    ((1, 1, 1), [0, -1], (1,)),
    ((1, 3, 1), None, (3,)),
    ((1, 3, 1), [2], (1, 3)),
])
def test_squeeze_keeps_one_element_as_shape_1(shape: tuple[int, ...], axis: Any, want: tuple[int, ...]) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    got = run_job(lambda a: array.squeeze(a, axis=axis), x)
    assert got.shape == want
    np.testing.assert_array_equal(got.ravel(), x.ravel())


# the legacy functions ---------------------------------------------------------------------------
I2 = np.array([[0, 2], [2, 1]], np.int32)
I1 = np.array([[0], [2]], np.int32)


@pytest.mark.parametrize("fn, want", [
    (lambda x: padding.pad(x, ((2, 0), (1, 1)), constant_value=5), np.pad(X, ((2, 0), (1, 1)), constant_values=5)),
    (lambda x: padding.pad_grad(padding.pad(x, [[1, 2], [0, 3]]), [[1, 2], [0, 3]]), X),
    (lambda x: array.stack([x, x * 2.0], axis=1), np.stack([X, X * 2], axis=1)),
    (lambda x: array.stack([x], axis=-1), X[..., None]),
    (lambda x: array.tile(x, [2]), np.tile(X, 2)),
    (lambda x: array.tile(x, (2, 1, 3)), np.tile(X, (2, 1, 3))),
    (lambda x: array.reverse(x, axis=0), X[::-1]),
    (lambda x: array.reverse(x, axis=[0, -1]), X[::-1, ::-1]),
    (lambda x: array.identity_n([x, x * 3.0])[1], X * 3),
    (lambda x: indexing.gather_nd(x, constants.constant(I2, dtype=np.int32)), X[I2[:, 0], I2[:, 1]]),
    (lambda x: indexing.gather_nd(x, constants.constant(I1, dtype=np.int32)), X[[0, 2]]),
    (lambda x: indexing.tensor_scatter_nd_update(x, constants.constant(I1, dtype=np.int32), constants.zeros_like(
        indexing.gather_nd(x, constants.constant(I1, dtype=np.int32)))),
     np.where(np.isin(np.arange(3), [0, 2])[:, None], 0, X)),
    (lambda x: indexing.tensor_scatter_nd_add(x, constants.constant([[1], [1]], dtype=np.int32), constants.ones_like(
        indexing.slice(x, [0, 0], [2, -1]))), X + np.array([[0], [2], [0]], np.float32)),
    (lambda x: indexing.gather(x, constants.constant([[3, 0], [1, 1], [2, 2]], dtype=np.int64), batch_dims=1),
     np.take_along_axis(X, np.array([[3, 0], [1, 1], [2, 2]]), axis=1)),
    (lambda x: array.parallel_cast(array.cast_to_current_logical_view(array.cast_to_static_shape(x))), X),
    (lambda x: array.hierarchical_parallel_cast(x, ["S(0)", "B"], grad_mode="restore"), X),
])
def test_legacy_functions(fn: Any, want: np.ndarray) -> None:
    got = run_job(fn, X)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_legacy_documented_examples() -> None:
    updates = np.array([10.2, 5.1, 12.7], np.float32)
    got = run_job(lambda i, u: indexing.scatter_nd(i, u, shape=[8]), np.array([[1], [6], [4]], np.int32), updates)
    np.testing.assert_allclose(got, [0, 10.2, 0, 0, 12.7, 0, 5.1, 0], rtol=1e-6)
    params = np.tile(np.array([1, 2, 3], np.float32), (5, 1))
    rows = np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3]], np.float32)
    index = np.array([[0], [4], [2]], np.int32)
    added = run_job(indexing.tensor_scatter_nd_add, params, index, rows)
    np.testing.assert_array_equal(added, [[2, 3, 4], [1, 2, 3], [4, 5, 6], [1, 2, 3], [3, 4, 5]])
    updated = run_job(indexing.tensor_scatter_nd_update, params, index, rows)
    np.testing.assert_array_equal(updated, [[1, 1, 1], [1, 2, 3], [3, 3, 3], [1, 2, 3], [2, 2, 2]])


def test_integer_pad_truncates_the_constant_and_names_follow_legacy() -> None:
    ints = np.arange(4, dtype=np.int32).reshape(2, 2)
    np.testing.assert_array_equal(run_job(lambda a: padding.pad(a, [[0, 1], [0, 0]], constant_value=7.9), ints),
                                  [[0, 1], [2, 3], [7, 7]])
    seen: dict[str, str] = {}

    def names(x: Any) -> Any:
        out = array.stack([x, x], name="st")
        seen["stack"] = out.lbn
        seen["cast"] = array.parallel_cast(x).lbn
        return out

    run_job(names, X)
    assert seen["stack"] == "stconcat/out_0"
    assert seen["cast"].startswith("ParallelCast_")


def test_stack_and_tile_differentiate_through_split_and_sum() -> None:
    session = probe.session_with_probe()
    try:
        @probe.job(session)
        def train(x: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
            y = array.tile(array.stack([x, math.multiply(x, x)], axis=0), [1, 2, 1])
            fc.add_loss(reduce.reduce_sum(y))
            probe.probe(x, "x")
            return y

        probe.RESULTS.clear()
        got = train(X)
        np.testing.assert_allclose(got, np.tile(np.stack([X, X * X]), (1, 2, 1)), rtol=1e-6)
        np.testing.assert_allclose(probe.RESULTS["x"], 2 * (1 + 2 * X), rtol=1e-5)
    finally:
        session.close()


@pytest.mark.parametrize("fn, match", [
    (lambda x: padding.pad(x, [1, 2]), "flow.pad.*pair"),
    (lambda x: padding.pad(x, [[0, -1], [0, 0]]), "paddings must be >= 0"),
    (lambda x: array.stack([x, array.reshape(x, (4, 3))]), "flow.stack.*one shape"),
    (lambda x: array.stack([x], axis=3), "flow.stack.*axis 3"),
    (lambda x: array.reverse(x, axis=2), "axis 2 is out of range"),
    (lambda x: array.reverse(x, axis="0"), "flow.reverse.*axis"),
    (lambda x: array.tile(x, [0, 1]), "tile multiples must be >= 1"),
    (lambda x: indexing.gather_nd(x, constants.constant([[0, 1, 2]], dtype=np.int32)),
     "gather_nd indices .* 3 coordinates"),
    (lambda x: indexing.gather_nd(x, constants.constant([[0.0]])), "gather_nd indices must be integers"),
    (lambda x: indexing.scatter_nd(constants.constant([[0]], dtype=np.int32), x, (5,)), "scatter_nd updates"),
    (lambda x: indexing.gather(x, constants.constant([[0]], dtype=np.int32), axis=0, batch_dims=1),
     "flow.gather.*batch_dims"),
    (lambda x: array.hierarchical_parallel_cast(x, ["B"], grad_mode="sum"), "grad_mode"),
    (lambda x: array.parallel_cast(x, distribute=3), "flow.parallel_cast.*distribute"),
])
def test_bad_arguments_name_the_function(fn: Any, match: str) -> None:
    with pytest.raises(fc.OpBuildError, match=match):
        run_job(fn, X)


def test_parallel_cast_lays_out_the_value_and_its_gradient_as_with_distribute_does():
    from flowjob_core import OpBuildError, Session
    from flowjob_core.api.variables import get_variable
    from flowjob_core.ir import distribute as flow_distribute
    from flowjob_core.ir.job import Job
    from flowjob_core.ir.layout import BROADCAST, split
    from flowjob_core.trace.builder import JobBuilder

    job = Job("cast")
    session = Session()
    with JobBuilder(job, session).activate():
        table = get_variable("table", (4, 2))
        rows = array.parallel_cast(table, distribute="S(0)", gradient_distribute=flow_distribute.broadcast())
        whole = array.parallel_cast(table, distribute=flow_distribute.broadcast(), gradient_distribute="S(1)")
        with pytest.raises(OpBuildError, match=r"flow.parallel_cast.*gradient_distribute must be 'B' or 'S\(axis\)'"):
            array.parallel_cast(table, gradient_distribute="P")
    assert job.layouts[rows.lbn] == split(0) and job.gradient_layouts[rows.lbn] == BROADCAST
    assert job.layouts[whole.lbn] == BROADCAST and job.gradient_layouts[whole.lbn] == split(1)
