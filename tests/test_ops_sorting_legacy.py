"""Sorting, segment sums, tril and polyval through real global functions: legacy's documented
values, its tie order, its argument order (top_k's axis before k), and clear build errors."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, OpBuildError
from flowjob_core.testing import check_grads
from flowjob_core.testing.modules import sibling

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session  # each test in its own session
RNG = np.random.default_rng(11)


def test_legacy_examples_of_sort_argsort_top_k_in_top_k() -> None:
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5,))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return flow.sort(x), flow.argsort(x), flow.math.top_k(x, k=2)

    values, order, top = job(np.array([10, 2, 9, 3, 7], np.float32))
    np.testing.assert_array_equal(values, [2, 3, 7, 9, 10])
    np.testing.assert_array_equal(order, [1, 3, 4, 2, 0])
    assert order.dtype == np.int32 and top.dtype == np.int32

    @flow.global_function()
    def top2(x: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        return flow.math.top_k(x, k=2)

    np.testing.assert_array_equal(top2(np.array([1, 3, 8, 7, 2], np.float32)), [2, 3])

    @flow.global_function()
    def in_top(targets: tp.Numpy.Placeholder((2,), dtype=flow.int32),
               predictions: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
        return flow.math.in_top_k(targets, predictions, 1)

    out = in_top(np.array([3, 1], np.int32), np.array([[0, 1, 2, 3], [3, 2, 1, 0]], np.float32))
    np.testing.assert_array_equal(out, [1, 0])
    assert out.dtype == np.int8 and flow.in_top_k is flow.math.in_top_k


def test_ties_list_the_lower_index_first_in_both_directions_and_axis_moves_by_transposes() -> None:
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        return (flow.argsort(x, direction="DESCENDING"), flow.argsort(x), flow.math.top_k(x, k=9),
                flow.argsort(x, axis=0, direction="DESCENDING"))

    x = np.array([[1, 2, 2], [5, 5, 5]], np.float32)
    desc, asc, top, down = job(x)
    np.testing.assert_array_equal(desc, [[1, 2, 0], [0, 1, 2]])  # not the reverse of ascending
    np.testing.assert_array_equal(asc, [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(top, desc)  # k clipped to the axis length, as legacy
    np.testing.assert_array_equal(down, [[1, 1, 1], [0, 0, 0]])


def test_segment_sums_match_legacy_examples() -> None:
    data = np.arange(1, 13, dtype=np.float32).reshape(3, 4)

    @flow.global_function()
    def job(d: tp.Numpy.Placeholder((3, 4)), ids: tp.Numpy.Placeholder((4,), dtype=flow.int32),
            rows: tp.Numpy.Placeholder((3,), dtype=flow.int32),
            batch: tp.Numpy.Placeholder((3, 4), dtype=flow.int32)) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        like = flow.zeros_like(flow.slice(d, [0, 0], [2, 4]))
        return (flow.math.unsorted_segment_sum(d, ids, num_segments=2, axis=1),
                flow.unsorted_segment_sum_like(d, rows, like, axis=0),
                flow.math.unsorted_batch_segment_sum(d, batch, 2))

    cols, rows, batch = job(data, np.array([0, 1, 0, 1], np.int32), np.array([0, 1, 0], np.int32),
                            np.array([[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0]], np.int32))
    np.testing.assert_array_equal(cols, [[4, 6], [12, 14], [20, 22]])
    np.testing.assert_array_equal(rows, [[10, 12, 14, 16], [5, 6, 7, 8]])
    np.testing.assert_array_equal(batch, [[6, 4], [19, 7], [32, 10]])


def test_segment_ids_out_of_range_add_nothing() -> None:
    @flow.global_function()
    def job(d: tp.Numpy.Placeholder((4,)), ids: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        return flow.unsorted_segment_sum(d, ids, 2)

    out = job(np.array([1, 2, 4, 8], np.float32), np.array([0, 2, -1, 1], np.int32))
    np.testing.assert_array_equal(out, [1, 8])


def test_tril_fused_scale_tril_and_polyval_values() -> None:
    x = np.tile(np.arange(1, 5, dtype=np.float32), (4, 1))

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 4)), v: tp.Numpy.Placeholder((3,))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return (flow.math.tril(x, 0), flow.math.fused_scale_tril(x, -1, fill_value=-9.0, scale=2.0),
                flow.math.polyval([1.0, 3.0, -2.0], v))

    low, scaled, poly = job(x, np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(low, np.tril(x))
    np.testing.assert_array_equal(scaled, np.where(np.tril(np.ones((4, 4)), -1) > 0, 2 * x, -9.0))  # fill unscaled
    np.testing.assert_array_equal(poly, [2, 8, 16])


def test_sort_gradient_follows_the_permutation() -> None:
    x = np.array([[0.3, -1.2, 2.0, 0.7]])
    check_grads("sort", [x], {"direction": "DESCENDING"})


@pytest.mark.parametrize("call, message", [
    (lambda x: flow.sort(x, direction="UP"), "direction"),
    (lambda x: flow.argsort(x, axis=2), "axis"),
    (lambda x: flow.math.top_k(x, k=0), "k must be"),
    (lambda x: flow.math.tril(flow.reshape(x, (6,))), "rank >= 2"),
    (lambda x: flow.math.unsorted_segment_sum(x, x, 2), "segment_ids must be integers"),
])
def test_bad_arguments_are_build_errors_naming_the_argument(call, message) -> None:
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return call(x)

    with pytest.raises(OpBuildError, match=message):
        job(np.zeros((2, 3), np.float32))


def test_polyval_refuses_coefficients_that_are_not_a_list() -> None:
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.polyval(np.array([1.0, 2.0]), x)

    with pytest.raises(ValueError, match="coeffs must be a list or tuple"):
        job(np.zeros(2, np.float32))


def test_nn_exports_the_math_triangles():
    # legacy exported one function under both names
    assert flow.nn.tril is flow.math.tril
    assert flow.nn.fused_scale_tril is flow.math.fused_scale_tril
    x = RNG.normal(size=(2, 3, 3)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 3))) -> tp.Numpy:
        return flow.nn.fused_scale_tril(x, diagonal=-1, fill_value=5, scale=2.0) + flow.nn.tril(x)

    np.testing.assert_allclose(job(x), np.where(np.tril(np.ones((3, 3)), -1) > 0, 2 * x, 5) + np.tril(x), rtol=1e-6)


def test_in_top_k_takes_mirrored_arguments_declared_apart() -> None:
    # legacy's test: targets declared (n + 10,), predictions (n + 5, c + 5); legacy checked no row count
    cfg = sibling(__file__, "op_surface_helpers").mirrored_config()

    @flow.global_function(function_config=cfg)
    def job(targets: tp.ListNumpy.Placeholder((20,), dtype=flow.int32),
            predictions: tp.ListNumpy.Placeholder((15, 10))) -> tp.ListNumpy:
        return flow.math.in_top_k(targets, predictions, k=2)

    predictions = RNG.random((10, 5)).astype(np.float32)
    targets = RNG.integers(0, 5, 10).astype(np.int32)
    (hit,) = job([targets], [predictions])
    higher = (predictions > predictions[np.arange(10), targets][:, None]).sum(axis=1)
    np.testing.assert_array_equal(hit, (higher < 2).astype(np.int8))
    with pytest.raises(FlowjobError, match="in_top_k: 10 targets need as many rows of predictions, got 4"):
        job([targets], [predictions[:4]])


def test_argmax_of_a_vector_has_shape_one() -> None:
    # legacy's argmax dropped the last axis and gave (1,) when nothing was left (TensorFlow gives a scalar)
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((100,), dtype=flow.int64)) -> tp.Numpy:
        return flow.math.argmax(x)

    x = RNG.integers(0, 50, 100)  # ties: the first maximum, as TensorFlow's
    out = job(x)
    assert out.shape == (1,) and out.dtype == np.int32 and out[0] == np.argmax(x)
