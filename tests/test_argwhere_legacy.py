"""flow.argwhere, flow.nonzero, one-argument flow.where and flow.sync_dynamic_resize as legacy v0.3/v0.4:
blobs whose row count the data decide, planned at their maximum. Values against numpy (legacy's own
tests compared with np.argwhere and x[:size]), through every return kind and readers that follow the
actual rows; readers that cannot follow are errors naming the job, op and source line."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, OpBuildError
from flowjob_core.plan.actual_shapes import DynamicShapeError
from flowjob_core.plan.planner import StepError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(11)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


def _random_input(shape, dtype):
    """Half zeros, as legacy's test drew them."""
    if dtype == np.float32:
        x = RNG.random(shape).astype(np.float32)
        x[x < 0.5] = 0.0
        return x
    return RNG.integers(0, 2, size=shape).astype(dtype)


FLOW_DTYPES = {np.float32: flow.float32, np.int32: flow.int32, np.int8: flow.int8, np.int64: flow.int64}


@pytest.mark.parametrize("shape", [(10,), (30, 4), (8, 16, 20)])
@pytest.mark.parametrize("value_dtype", [np.float32, np.int32, np.int8])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("mirrored", [False, True])
def test_argwhere_matches_numpy(shape, value_dtype, index_dtype, mirrored):
    x = _random_input(shape, value_dtype)
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.mirrored_view() if mirrored else flow.scope.consistent_view())
    kind = tp.ListNumpy if mirrored else tp.Numpy

    @flow.global_function("predict", function_config=config)
    def argwhere_fn(x: kind.Placeholder(shape, dtype=FLOW_DTYPES[value_dtype])) -> tp.ListNumpy:
        return flow.argwhere(x, dtype=FLOW_DTYPES[index_dtype])

    (got,) = argwhere_fn([x] if mirrored else x)
    assert got.dtype == index_dtype
    np.testing.assert_array_equal(got, np.argwhere(x))


def test_four_mirrored_devices_each_get_their_own_rows():
    """Legacy's 1n4d case: a mirrored placeholder on four devices, one result per device."""
    flow.config.cpu_device_num(4)
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function("predict", function_config=config)
    def argwhere_fn(x: tp.ListNumpy.Placeholder((10, 5))) -> tp.ListNumpy:
        return flow.argwhere(x, dtype=flow.int64)

    xs = [_random_input((10, 5), np.float32) for _ in range(4)]
    got = argwhere_fn(xs)
    assert len(got) == 4
    for x, rows in zip(xs, got):
        assert rows.dtype == np.int64
        np.testing.assert_array_equal(rows, np.argwhere(x))


def test_counts_change_from_call_to_call_and_earlier_results_keep():
    @flow.global_function()
    def argwhere_fn(x: tp.Numpy.Placeholder((20, 4))) -> tp.Numpy:
        return flow.argwhere(x)

    xs = [_random_input((20, 4), np.float32) for _ in range(4)] + [np.zeros((20, 4), np.float32),
                                                                    np.ones((20, 4), np.float32)]
    results = [argwhere_fn(x) for x in xs]
    for x, got in zip(xs, results):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, np.argwhere(x))
    assert results[-2].shape == (0, 2) and results[-1].shape == (80, 2)


def test_legacy_doc_examples():
    @flow.global_function()
    def argwhere_job(x: tp.Numpy.Placeholder(shape=(2, 3), dtype=flow.float32)) -> tp.ListNumpy:
        return flow.argwhere(x)

    @flow.global_function()
    def where_job(condition: tp.Numpy.Placeholder(shape=(5,), dtype=flow.int32)) -> tp.ListNumpy:
        return flow.where(condition=condition)

    @flow.global_function()
    def resize_job(x: tp.Numpy.Placeholder(shape=(4, 3), dtype=flow.float32),
                   size: tp.Numpy.Placeholder(shape=(1,), dtype=flow.int32)) -> tp.ListNumpy:
        return flow.sync_dynamic_resize(inputs=x, size=size)

    (got,) = argwhere_job(np.array([[0, 1, 0], [2, 0, 2]], np.float32))
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [1, 2]])
    assert got.dtype == np.int32
    (got,) = where_job(np.array([3, 0, 1, 0, 1], np.int32))
    np.testing.assert_array_equal(got, [[0], [2], [4]])
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    (got,) = resize_job(x, np.array([2], np.int32))
    np.testing.assert_array_equal(got, x[:2])


@pytest.mark.parametrize("x_shape", [(100,), (100, 1), (1000, 10), (10, 10, 200)])
@pytest.mark.parametrize("data_type", ["float32", "double", "int32", "int64"])
@pytest.mark.parametrize("size_type", ["int32", "int64"])
def test_sync_dynamic_resize_as_legacy_test(x_shape, data_type, size_type):
    @flow.global_function()
    def resize_job(x: tp.Numpy.Placeholder(x_shape, dtype=getattr(flow, data_type)),
                   size: tp.Numpy.Placeholder((1,), dtype=getattr(flow, size_type))):
        return flow.sync_dynamic_resize(x, size)

    size = int(RNG.integers(0, x_shape[0]))
    x = RNG.random(x_shape).astype(data_type)
    got = resize_job(x, np.array([size]).astype(size_type)).get().numpy_list()[0]
    np.testing.assert_array_equal(got, x[:size])


def test_nonzero_is_argwhere_transposed_with_legacy_names():
    x = np.array([[0, 3, 0], [1, 0, 2]], np.float32)

    @flow.global_function()
    def nonzero_job(x: tp.Numpy.Placeholder((2, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.nonzero(x), flow.nonzero(x, name="nz")

    plain, named = nonzero_job(x)
    np.testing.assert_array_equal(plain, np.array(np.nonzero(x)))
    np.testing.assert_array_equal(named, np.array(np.nonzero(x)))
    names = [n.name for n in nonzero_job.plan().job.nodes]
    assert "nz_ArgWhere" in names and "nz_Transpose" in names
    assert any(n.startswith("Nonzero_ArgWhere_") for n in names)
    assert any(n.startswith("Nonzero_Transpose_") for n in names)


def test_readers_follow_the_actual_rows():
    """cast, elementwise ops, a reduction, reshapes (-1 and static), identity and gather with the rows as
    indices: each sees only the rows holding data."""
    table = RNG.random((6, 3)).astype(np.float32)

    @flow.global_function()
    def readers(x: tp.Numpy.Placeholder((6,)), t: tp.Numpy.Placeholder((6, 3))
                ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        rows = flow.argwhere(x)                      # (count, 1)
        scaled = flow.cast(rows, flow.float32) * 2.0 + 1.0
        total = flow.math.reduce_sum(scaled)
        flat = flow.reshape(rows, (-1,))
        static = flow.reshape(rows, (6,))            # a static target realigned to the actual rows
        picked = flow.gather(t, flow.identity(flat))
        return scaled, total, flat, static, picked, flow.math.reduce_sum(picked, axis=[0])

    for x in (np.array([0, 1, 0, 1, 1, 0], np.float32), np.zeros(6, np.float32), np.ones(6, np.float32)):
        idx = np.flatnonzero(x).astype(np.int32)
        scaled, total, flat, static, picked, column_sums = readers(x, table)
        np.testing.assert_array_equal(scaled, idx[:, None] * 2.0 + 1.0)
        np.testing.assert_allclose(total, [np.sum(idx * 2.0 + 1.0)])
        np.testing.assert_array_equal(flat, idx)
        np.testing.assert_array_equal(static, idx)
        np.testing.assert_array_equal(picked, table[idx])
        np.testing.assert_allclose(column_sums, table[idx].sum(axis=0), rtol=1e-6)


def test_every_return_kind_and_watch_get_the_actual_rows():
    x = np.array([[1, 0], [0, 1]], np.float32)
    expected = np.argwhere(x)
    seen = {}

    @flow.global_function()
    def as_lists(x: tp.Numpy.Placeholder((2, 2))) -> tp.ListListNumpy:
        rows = flow.argwhere(x)
        flow.watch(rows, lambda v: seen.setdefault("watched", v.numpy()))
        return rows

    @flow.global_function()
    def as_callback(x: tp.Numpy.Placeholder((2, 2))) -> tp.Callback[tp.Numpy]:
        return flow.argwhere(x)

    @flow.global_function()
    def as_future(x: tp.Numpy.Placeholder((2, 2))):
        return flow.argwhere(x)

    np.testing.assert_array_equal(as_lists(x)[0][0], expected)
    as_callback(x)(lambda v: seen.setdefault("callback", v))
    np.testing.assert_array_equal(as_future(x).get().numpy(), expected)
    flow.sync_default_session()
    np.testing.assert_array_equal(seen["watched"], expected)
    np.testing.assert_array_equal(seen["callback"], expected)


def test_smaller_mirrored_feed_and_argwhere():
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def argwhere_fn(x: tp.ListNumpy.Placeholder((8, 3))) -> tp.ListNumpy:
        return flow.argwhere(x) + 0

    for rows in (8, 5, 1):
        x = _random_input((rows, 3), np.float32)
        np.testing.assert_array_equal(argwhere_fn([x])[0], np.argwhere(x))


def test_a_reader_with_a_traced_shape_is_refused_naming_job_op_and_line():
    @flow.global_function()
    def broadcasts(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.broadcast_like(flow.argwhere(x, name="found"), flow.zeros((4, 3), dtype=flow.int32))

    with pytest.raises(DynamicShapeError) as info:
        broadcasts(np.ones(4, np.float32))
    text = str(info.value)
    assert "job 'broadcasts'" in text and "'found'" in text and "test_argwhere_legacy.py" in text
    assert "(broadcast_to)" in text and "fixed when the job was traced" in text

    @flow.global_function()
    def still_fine(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.argwhere(x)

    np.testing.assert_array_equal(still_fine(np.array([0, 2, 0, 1], np.float32)), [[1], [3]])


def test_a_reader_that_cannot_take_the_actual_rows_fails_at_that_step_naming_it():
    @flow.global_function()
    def adds(x: tp.Numpy.Placeholder((4,)), y: tp.Numpy.Placeholder((4, 1), dtype=flow.int32)) -> tp.Numpy:
        return flow.math.add(flow.argwhere(x), y, name="mixed")

    y = np.arange(4, dtype=np.int32).reshape(4, 1)
    np.testing.assert_array_equal(adds(np.ones(4, np.float32), y), np.arange(4).reshape(4, 1) * 2)
    with pytest.raises(DynamicShapeError) as info:
        adds(np.array([1, 0, 1, 0], np.float32), y)
    assert "job 'adds'" in str(info.value) and "'mixed'" in str(info.value)
    np.testing.assert_array_equal(adds(np.ones(4, np.float32), y), np.arange(4).reshape(4, 1) * 2)


def test_resize_past_the_rows_fails_naming_the_op_and_the_session_stays_usable():
    @flow.global_function()
    def resize_job(x: tp.Numpy.Placeholder((3, 2)), size: tp.Numpy.Placeholder((1,), dtype=flow.int32)
                   ) -> tp.Numpy:
        return flow.sync_dynamic_resize(x, size, name="cut")

    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for bad in (4, -1):
        with pytest.raises(StepError, match="'cut'"):
            resize_job(x, np.array([bad], np.int32))
    np.testing.assert_array_equal(resize_job(x, np.array([3], np.int32)), x)


def test_bad_arguments_are_build_errors():
    with pytest.raises(OpBuildError, match="dtype"):
        @flow.global_function()
        def float_indices(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return flow.argwhere(x, dtype=flow.float32)

        float_indices(np.ones(3, np.float32))
    with pytest.raises(OpBuildError, match="both"):
        @flow.global_function()
        def half_where(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return flow.where(x, x)

        half_where(np.ones(3, np.float32))
    with pytest.raises(FlowjobError, match="size"):
        @flow.global_function()
        def wide_size(x: tp.Numpy.Placeholder((3,)), s: tp.Numpy.Placeholder((2,), dtype=flow.int32)
                      ) -> tp.Numpy:
            return flow.sync_dynamic_resize(x, s)

        wide_size(np.ones(3, np.float32), np.ones(2, np.int32))


def test_train_job_returns_selected_rows_beside_its_update():
    """argwhere in a train job whose loss does not read it: the rows come back, the update is the plain one."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(4,), initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(x * w)
        sgd(loss)
        return loss, flow.argwhere(x * w)

    x = np.array([0, 2, 0, 3], np.float32)
    loss, rows = train(x)
    np.testing.assert_allclose(loss, [5.0])
    np.testing.assert_array_equal(rows, [[1], [3]])
    np.testing.assert_allclose(value("w"), 1.0 - 0.1 * x)


def test_train_gradient_through_selected_rows():
    """The gradient reaches only the selected rows, as legacy's (the reduction's gradient takes the rows
    of the step, as legacy's broadcast_like did)."""
    @flow.global_function(type="train")
    def train(mask: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5, 2), initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(flow.gather(w, flow.reshape(flow.argwhere(mask), (-1,))))
        sgd(loss)
        return loss

    np.testing.assert_allclose(train(np.array([1, 0, 1, 0, 0], np.float32)), [4.0])
    np.testing.assert_allclose(value("w"), [[0.9, 0.9], [1, 1], [0.9, 0.9], [1, 1], [1, 1]])
    np.testing.assert_allclose(train(np.array([0, 0, 0, 0, 1], np.float32)), [2.0])
    np.testing.assert_allclose(value("w")[:, 0], [0.9, 1, 0.9, 1, 0.9])


def test_a_loss_whose_rows_the_data_decide_scales_by_the_rows_of_the_step():
    """legacy scaled the variable gradients by the loss instances of the step, not by the maximum"""
    @flow.global_function(type="train")
    def train(mask: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5, 2), initializer=flow.constant_initializer(1.0))
        loss = flow.gather(w, flow.reshape(flow.argwhere(mask), (-1,))) * 3.0
        sgd(loss)
        return loss

    np.testing.assert_allclose(train(np.array([1, 0, 1, 0, 0], np.float32)), np.full((2, 2), 3.0))
    np.testing.assert_allclose(value("w")[:, 0], [1 - 0.1 * 3 / 4, 1, 1 - 0.1 * 3 / 4, 1, 1])
    assert train(np.zeros(5, np.float32)).shape == (0, 2)  # no rows: nothing to update, no nan
    np.testing.assert_allclose(value("w")[:, 0], [1 - 0.1 * 3 / 4, 1, 1 - 0.1 * 3 / 4, 1, 1])


def test_jobs_without_such_ops_keep_their_plain_kernels():
    @flow.global_function()
    def plain(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.relu(x) + 1.0

    @flow.global_function()
    def selects(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.relu(x) + flow.cast(flow.math.reduce_sum(flow.argwhere(x)), flow.float32)

    def followers(job):
        step = job.plan().step
        scope = getattr(step, "generated", step).__globals__  # a recording backend's step keeps the generated one
        return [k for k, fn in scope.items() if k.startswith("k") and "Followers" in getattr(fn, "__qualname__", "")]

    plain(np.ones(3, np.float32))
    assert followers(plain) == []
    np.testing.assert_allclose(selects(np.array([0, 1, 1], np.float32)), [3, 4, 4])
    assert len(followers(selects)) >= 2  # the reduction, the cast (or their fused chain) and the add
