"""Tensor buffers and tensor lists as legacy v0.3/v0.4 (``flow.tensor_to_tensor_buffer``, ``gen_tensor_buffer``,
``tensor_buffer_to_list_of_tensors``, ``tensor_list_to_tensor_buffer``, ``tensor_buffer_to_tensor_list``,
``tensor_list_split``), modeled on legacy's test_tensor_buffer_ops.py, test_tensor_buffer_to_list_of_tensors.py
and the tensor-list examples of its documentation."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.plan.planner import StepError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(28)
_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, mirrored_config = _helpers.fresh_session, _helpers.mirrored_config
list_static_shape = _helpers.list_static_shape


def test_tensor_buffer_round_trip():
    """Legacy's test_tensor_buffer_convert: to a (16, 24) buffer of (32, 36) tensors and back, unchanged."""
    x = RNG.random((16, 24, 32, 36)).astype(np.float32)

    @flow.global_function()
    def convert(x: tp.Numpy.Placeholder(x.shape, dtype=flow.float32)) -> tp.Numpy:
        buffer = flow.tensor_to_tensor_buffer(x, instance_dims=2)
        assert buffer.shape == (16, 24) and buffer.dtype == flow.tensor_buffer
        return flow.tensor_buffer_to_tensor(buffer, dtype=flow.float32, instance_shape=[32, 36])

    np.testing.assert_array_equal(convert(x), x)
    y = RNG.random((16, 24, 32, 36)).astype(np.float32)
    np.testing.assert_array_equal(convert(y), y)  # a second step: the elements are copies, not stale views


@pytest.mark.parametrize("shape", [(2, 2), (4,)])
@pytest.mark.parametrize("dtype", [flow.float32, flow.double, flow.int32, flow.int64])
def test_gen_tensor_buffer_to_list_of_tensors(shape, dtype):
    """Legacy's test_tensor_buffer_to_list_of_tensors: four elements of their own shapes, dynamic outputs."""
    shapes, values = [(10, 10), (50, 50), (20, 80), (100, 100)], [0.0, 1.0, 2.0, 3.0]

    @flow.global_function()
    def to_list() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        with flow.scope.placement("cpu", "0:0"):
            x = flow.gen_tensor_buffer(shape, shapes, values, dtype)
            return tuple(flow.tensor_buffer_to_list_of_tensors(x, (100, 100), dtype, True))

    outs = to_list()
    for out, s, v in zip(outs, shapes, values):
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, np.full(s, v, dtype))


def test_list_of_tensors_feeds_readers_of_the_actual_shape():
    """A dynamic output's readers run on the element's own shape (its sum is over the element only)."""
    @flow.global_function()
    def summed() -> Tuple[tp.Numpy, tp.Numpy]:
        x = flow.gen_tensor_buffer((2,), [(2, 1), (1, 2)], [1.0, 5.0])
        a, b = flow.tensor_buffer_to_list_of_tensors(x, (3, 3), flow.float, True)
        return flow.math.reduce_sum(a), flow.math.reduce_sum(b * 2.0)

    a, b = summed()
    assert float(a) == 2.0 and float(b) == 20.0


def test_list_of_tensors_refuses_another_shape_unless_dynamic():
    @flow.global_function()
    def fixed() -> tp.Numpy:
        x = flow.gen_tensor_buffer((1,), [(2, 3)], [1.0])
        return flow.tensor_buffer_to_list_of_tensors(x, (3, 3), flow.float)[0]

    with pytest.raises(StepError, match=r"element 0 has shape \(2, 3\), not out_shape \(3, 3\)"):
        fixed()


def test_tensor_buffer_to_tensor_checks_the_elements():
    @flow.global_function()
    def wrong_shape() -> tp.Numpy:
        x = flow.gen_tensor_buffer((2,), [(2, 2), (2, 3)], [1.0, 2.0])
        return flow.tensor_buffer_to_tensor(x, flow.float, (2, 2))

    with pytest.raises(StepError, match=r"element 1 has shape \(2, 3\), instance_shape is \(2, 2\)"):
        wrong_shape()

    @flow.global_function()
    def wrong_dtype() -> tp.Numpy:
        x = flow.gen_tensor_buffer((1,), [(2,)], [1.0], flow.int32)
        return flow.tensor_buffer_to_tensor(x, flow.float, (2,))

    with pytest.raises(StepError, match="element is int32, the op's dtype is float32"):
        wrong_dtype()


def test_a_dense_blob_is_not_a_tensor_buffer():
    with pytest.raises(OpBuildError, match="must be a tensor buffer"):
        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            return flow.tensor_buffer_to_tensor(x, flow.float, (3,))

        job(np.zeros((2, 3), np.float32))


def test_tensor_list_round_trip_keeps_each_item():
    """v0.3's documented example: a tensor list to a buffer and back, items of different shapes."""
    @flow.global_function(function_config=mirrored_config())
    def round_trip(x: tp.ListListNumpy.Placeholder(shape=(2, 5, 4), dtype=flow.float32)) -> tp.ListListNumpy:
        buffer = flow.tensor_list_to_tensor_buffer(input=x)
        return flow.tensor_buffer_to_tensor_list(buffer, shape=(5, 4), dtype=flow.float32)

    x = RNG.random((1, 3, 2)).astype(np.float32)
    y = RNG.random((1, 2, 2)).astype(np.float32)
    (items,) = round_trip([[x, y]])
    assert [i.shape for i in items] == [(1, 3, 2), (1, 2, 2)]
    np.testing.assert_array_equal(items[0], x)
    np.testing.assert_array_equal(items[1], y)


def test_tensor_buffer_to_tensor_list_from_a_dense_buffer():
    """v0.3's documented example: every item (1, 16, 64, 64) of a (4,) buffer."""
    x = RNG.standard_normal((4, 16, 8, 8)).astype(np.float32)

    @flow.global_function()
    def to_list(x: tp.Numpy.Placeholder(x.shape, dtype=flow.float32)) -> tp.ListListNumpy:
        buffer = flow.tensor_to_tensor_buffer(x, instance_dims=3)
        return flow.tensor_buffer_to_tensor_list(input=buffer, shape=(16, 8, 8), dtype=flow.float32)

    (items,) = to_list(x)
    assert len(items) == 4 and all(i.shape == (1, 16, 8, 8) for i in items)
    np.testing.assert_array_equal(np.concatenate(items), x)


def test_tensor_list_split():
    """v0.3's documented example: one ListNumpy per item, without its leading axis."""
    @flow.global_function(function_config=mirrored_config())
    def split(x: tp.ListListNumpy.Placeholder(shape=(2, 5, 4), dtype=flow.float32)) -> Tuple[tp.ListNumpy,
                                                                                               tp.ListNumpy]:
        return flow.tensor_list_split(x)

    x = RNG.random((1, 3, 2)).astype(np.float32)
    y = RNG.random((1, 2, 2)).astype(np.float32)
    first, second = split([[x, y]])
    assert first[0].shape == (3, 2) and second[0].shape == (2, 2)
    np.testing.assert_array_equal(first[0], x[0])
    np.testing.assert_array_equal(second[0], y[0])


def test_tensor_list_to_tensor_buffer_by_user_op_builder():
    """The ops are records like any other: legacy's generic op call reaches them by name."""
    x = RNG.random((3, 4)).astype(np.float32)

    @flow.global_function()
    def built(x: tp.Numpy.Placeholder(x.shape)) -> tp.Numpy:
        buffer = (flow.user_op_builder("to_buffer").Op("tensor_to_tensor_buffer").Input("in", [x]).Output("out")
                  .Attr("instance_dims", 1).Build().InferAndTryRun().RemoteBlobList()[0])
        return flow.tensor_buffer_to_tensor(buffer, flow.float, (4,))

    np.testing.assert_array_equal(built(x), x)
