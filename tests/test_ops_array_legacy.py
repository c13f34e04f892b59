"""Legacy v0.4 array names against numpy and legacy's documented outputs: slice_v2 / slice_update /
slice, zeros / ones / range / elem_cnt, expand, diag, masked_fill, dim_gather, reshape_like /
dynamic_reshape / reshape(-1), broadcast_to_compatible_with, the 2-d paddings and same_padding,
assign / system.assign, transpose's legacy arguments, one_hot's dtypes, the dtype names and flow.Size."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, OpBuildError
from flowjob_core.plan.planner import StepError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(7)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


def _grad_of(shape, build, x, weights):
    """(forward, d sum(build(x) * weights) / dx) through a train job (watch_diff on x + zero variable)."""
    got = {}

    @flow.global_function(type="train")
    def grad_job(x: tp.Numpy.Placeholder(shape), w: tp.Numpy.Placeholder(weights.shape)) -> tp.Numpy:
        v = flow.get_variable("v", shape=shape, initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = build(xv)
        sgd(flow.math.reduce_sum(y * w))
        return y

    out = grad_job(x, weights)
    flow.sync_default_session()
    return out, got["dx"]


# slice_v2 / slice_update / slice ---------------------------------------------------------------
def test_slice_v2_legacy_example_and_gradient():
    x = RNG.normal(size=(3, 6, 9)).astype(np.float32)
    tups = [[None, None, None], [0, 5, 2], [0, 6, 3]]
    w = RNG.normal(size=(3, 3, 2)).astype(np.float32)
    out, dx = _grad_of((3, 6, 9), lambda b: flow.slice_v2(b, tups), x, w)
    np.testing.assert_array_equal(out, x[:, 0:5:2, 0:6:3])
    expected = np.zeros_like(x)
    expected[:, 0:5:2, 0:6:3] = w
    np.testing.assert_allclose(dx, expected)


def test_slice_v2_negative_steps_and_short_lists():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.slice_v2(x, [(None, None, -1)]) + flow.slice_v2(x, [(-1, -5, -1), (None, None, None)])

    np.testing.assert_array_equal(job(x), x[::-1] + x[-1:-5:-1])


def test_slice_v2_of_a_dynamic_feed_with_an_empty_axis():
    """Legacy's test_slice_dynamic_empty_blob: an open slice of a zero-length axis is an empty blob."""
    cfg = flow.FunctionConfig()
    cfg.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=cfg)
    def job(x: tp.ListNumpy.Placeholder((8, 2, 10))) -> tp.ListNumpy:
        return flow.slice_v2(x, [(None, None, None), (None, None, None), (2, 3, None)])

    x = RNG.random((5, 0, 5)).astype(np.float32)
    (out,) = job([x])
    assert out.shape == (5, 0, 1)


@pytest.mark.parametrize("tups, message", [
    ([(0, 2, 0)], "step of axis 0 can't be 0"),
    ([(4, None, 1)], r"start 4 of axis 0 must be in \[-4, 4\)"),
    ([(None, 6, 1)], r"stop 6 of axis 0 must be in \[-5, 4\]"),
    ([(2, 1, 1)], "selects nothing"),
    ([(0, 1, 1)] * 3, "at most 2"),
    ([(0, 1)], r"\(start, stop, step\)"),
])
def test_slice_v2_rejects_bad_slices_naming_the_function(tups, message):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.slice_v2(x, tups)

    with pytest.raises(OpBuildError, match=f"flow.slice_v2 at .*{message}"):
        job(np.zeros((4, 3), np.float32))


def test_slice_update_legacy_example_leaves_x_unchanged_and_differentiates_both():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5,)), update: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.slice_update(x=x, update=update, slice_tup_list=[[1, 4, 1]])

    x = np.ones(5, np.float32)
    np.testing.assert_array_equal(job(x, np.array([2, 3, 4], np.float32)), [1, 2, 3, 4, 1])
    np.testing.assert_array_equal(x, np.ones(5))

    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 5)), w: tp.Numpy.Placeholder((2, 5))) -> tp.Numpy:
        u = flow.get_variable("u", shape=(2, 2), initializer=flow.ones_initializer())
        v = flow.get_variable("v", shape=(2, 5), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = flow.slice_update(xv, u, [(None, None, None), (0, 4, 2)])
        sgd(flow.math.reduce_sum(y * w))
        return y

    w = RNG.normal(size=(2, 5)).astype(np.float32)
    train(np.zeros((2, 5), np.float32), w)
    mask = np.ones((2, 5), np.float32)
    mask[:, 0:4:2] = 0
    np.testing.assert_allclose(got["dx"], w * mask)
    np.testing.assert_allclose(value("u"), 1 - 0.1 * w[:, 0:4:2], rtol=1e-6)


def test_slice_matches_legacy_example_and_cuts_a_box_running_past_the_end():
    x = np.arange(1, 10, dtype=np.float32).reshape(3, 3)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.slice(x, begin=[None, 0], size=[None, 2]), flow.slice(x, begin=[1, 1], size=[3, -1])

    first, second = job(x)
    np.testing.assert_array_equal(first, x[:, :2])
    np.testing.assert_array_equal(second, x[1:, 1:])  # legacy: begin + size past the end stops at the end


# fills -----------------------------------------------------------------------------------------------------
def test_zeros_ones_elem_cnt_and_their_legacy_names():
    nodes = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5, 2))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        z, o = flow.zeros((2, 3)), flow.ones(shape=(2,), dtype=flow.int8, name="my_ones")
        c, c64 = flow.elem_cnt(x), flow.elem_cnt(inputs=x, dtype=flow.int64)
        nodes.update(z=z.op_name, o=o.op_name, c=c.op_name)
        return z, o, c, c64

    z, o, c, c64 = job(np.zeros((5, 2), np.float32))
    assert z.dtype == np.float32 and z.shape == (2, 3) and not z.any()
    assert o.dtype == np.int8 and o.tolist() == [1, 1]
    assert c.dtype == np.int32 and c.tolist() == [10] and c64.dtype == np.int64 and c64.tolist() == [10]
    assert nodes["z"].startswith("Zeros_") and nodes["z"].endswith("constant")
    assert nodes["o"] == "my_onesconstant" and nodes["c"].startswith("ElemCnt_")


def test_range_legacy_examples_dtypes_and_errors():
    @flow.global_function()
    def job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return (flow.range(10, dtype=flow.int64), flow.range(1, 10, 3, name="r2"),
                flow.range(-2, 3, 2, dtype=flow.float, name="r3"))

    a, b, c = job()
    assert a.dtype == np.int64 and a.tolist() == list(range(10))
    assert b.dtype == np.int64 and b.tolist() == [1, 4, 7]
    assert c.dtype == np.float32 and c.tolist() == [-2.0, 0.0, 2.0]


@pytest.mark.parametrize("args", [(3, 1), (0, 4, 5), (0.5, 4), (0, 4, 0)])
def test_range_refuses_what_legacy_asserted(args):
    @flow.global_function()
    def bad() -> tp.Numpy:
        return flow.range(*args)

    with pytest.raises(OpBuildError, match="flow.range at .*limit"):
        bad()


# expand / reshape_like / dynamic_reshape / reshape / broadcast_to_compatible_with ---------------------------
def test_expand_legacy_example_new_axes_and_gradient():
    x = np.array([[[[0, 1]], [[2, 3]], [[4, 5]]]], dtype=np.int32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 3, 1, 2), dtype=flow.int32)) -> tp.Numpy:
        return flow.expand(x=x, expand_size=[1, 3, 2, 2])

    np.testing.assert_array_equal(job(x), np.broadcast_to(x, (1, 3, 2, 2)))

    x2 = RNG.normal(size=(3, 1)).astype(np.float32)
    w = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    out, dx = _grad_of((3, 1), lambda b: flow.expand(b, [2, -1, 4]), x2, w)
    np.testing.assert_allclose(out, np.broadcast_to(x2, (2, 3, 4)))
    np.testing.assert_allclose(dx, w.sum(axis=(0, 2))[:, None], rtol=1e-5)


@pytest.mark.parametrize("size", [[3], [2, 4, 1], [-1, 3, 1]])
def test_expand_refuses_what_legacy_asserted(size):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 1))) -> tp.Numpy:
        return flow.expand(x, size)

    with pytest.raises(OpBuildError, match="flow.expand at"):
        job(np.zeros((3, 1), np.float32))


def test_reshape_like_dynamic_reshape_and_reshape_minus_one():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    names = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 4))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        like = flow.constant(value=1, dtype=flow.int8, shape=(2, 2, 4))
        a = flow.reshape_like(x, like=like)
        b = flow.dynamic_reshape(x, (-1, 8))
        c = flow.reshape(x, [2, -1])
        names.update(a=a.op_name, b=b.op_name)
        return a, b, c

    a, b, c = job(x)
    np.testing.assert_array_equal(a, x.reshape(2, 2, 4))
    np.testing.assert_array_equal(b, x.reshape(2, 8))
    np.testing.assert_array_equal(c, x.reshape(2, 8))
    assert names["a"].startswith("ReshapeLike_") and names["b"].startswith("DynamicReshape_")

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((4, 4))) -> tp.Numpy:
        return flow.reshape(x, [3, -1])

    with pytest.raises(OpBuildError, match="16 is not a multiple of 3"):
        bad(x)


def test_broadcast_to_compatible_with_in_both_namespaces():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 1, 1))) -> tp.Numpy:
        a = flow.constant(value=1, dtype=flow.float32, shape=(1, 2, 1))
        b = flow.constant(value=1, dtype=flow.float32, shape=(1, 1, 3))
        return flow.math.broadcast_to_compatible_with(x, [a, b])

    assert flow.broadcast_to_compatible_with is flow.math.broadcast_to_compatible_with
    x = RNG.normal(size=(4, 1, 1)).astype(np.float32)
    np.testing.assert_array_equal(job(x), np.broadcast_to(x, (4, 2, 3)))

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((4, 1, 1))) -> tp.Numpy:
        return flow.broadcast_to_compatible_with(x, [flow.constant(1.0, shape=(3, 1, 1))])

    with pytest.raises(OpBuildError, match="do not broadcast"):
        bad(x)


# diag / dim_gather / masked_fill ------------------------------------------------------------------------
def test_diag_legacy_example_offsets_and_gradients():
    m = np.arange(1, 10, dtype=np.float32).reshape(3, 3)

    @flow.global_function()
    def diags(m: tp.Numpy.Placeholder((3, 3)), v: tp.Numpy.Placeholder((2,))) -> Tuple[tp.Numpy, tp.Numpy,
                                                                                         tp.Numpy]:
        return flow.diag(m), flow.diag(m, diagonal=-1), flow.diag(v, 1)

    main, below, square = diags(m, np.array([5, 6], np.float32))
    np.testing.assert_array_equal(main, [1, 5, 9])
    np.testing.assert_array_equal(below, [4, 8])
    np.testing.assert_array_equal(square, np.diag([5, 6], 1))

    w = RNG.normal(size=(2,)).astype(np.float32)
    _, dx = _grad_of((2, 3), lambda b: flow.diag(b, 1), RNG.normal(size=(2, 3)).astype(np.float32), w)
    np.testing.assert_allclose(dx, [[0, w[0], 0], [0, 0, w[1]]])

    @flow.global_function()
    def bad(m: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.diag(m, 3)

    with pytest.raises(OpBuildError, match="lies outside"):
        bad(np.zeros((2, 3), np.float32))


def test_dim_gather_legacy_example_and_gradient_with_repeats():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 2), dtype=flow.float64),
            index: tp.Numpy.Placeholder((2, 2), dtype=flow.int32)) -> tp.Numpy:
        return flow.dim_gather(x, 1, index)

    out = job(np.array([[1, 2], [3, 4]], np.float64), np.array([[1, 0], [0, 1]], np.int32))
    np.testing.assert_array_equal(out, [[2, 1], [3, 4]])

    index = np.array([[0, 0, 2], [1, 1, 1]], np.int64)
    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3)), index: tp.Numpy.Placeholder((2, 3), dtype=flow.int64)) -> tp.Numpy:
        v = flow.get_variable("v", shape=(2, 3), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = flow.dim_gather(xv, 1, index)
        sgd(flow.math.reduce_sum(y))
        return y

    x = RNG.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(train(x, index), np.take_along_axis(x, index, 1))
    np.testing.assert_allclose(got["dx"], [[2, 0, 1], [0, 3, 0]])


def test_dim_gather_checks_shapes_as_legacy():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3)), index: tp.Numpy.Placeholder((3, 3), dtype=flow.int32)) -> tp.Numpy:
        return flow.dim_gather(x, 1, index)

    with pytest.raises(OpBuildError, match="must match except at dim 1"):
        job(np.zeros((2, 3), np.float32), np.zeros((3, 3), np.int32))


def test_masked_fill_legacy_example_broadcast_and_gradient():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,), dtype=flow.float32),
            mask: tp.Numpy.Placeholder((4,), dtype=flow.int8)) -> tp.Numpy:
        return flow.masked_fill(x, mask, value=5)

    out = job(np.array([1, 2, 3, 4], np.float32), np.array([1, 0, 0, 1], np.int8))
    np.testing.assert_array_equal(out, [5, 2, 3, 5])

    mask = np.array([[1], [0]], np.int32)
    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3)), mask: tp.Numpy.Placeholder((2, 1), dtype=flow.int32)) -> tp.Numpy:
        v = flow.get_variable("v", shape=(2, 3), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = flow.masked_fill(xv, mask, -1.5, name="mf")
        sgd(flow.math.reduce_sum(y * 2.0))
        return y

    x = RNG.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(train(x, mask), np.where(mask, -1.5, x))
    np.testing.assert_array_equal(got["dx"], np.where(mask, 0.0, 2.0) * np.ones((2, 3)))

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((4,)), mask: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.masked_fill(x, mask, 1)

    with pytest.raises(OpBuildError, match="mask must be an int8, int32 or int64 blob"):
        bad(np.zeros(4, np.float32), np.zeros(4, np.float32))


# paddings -----------------------------------------------------------------------------------------------------
def test_2d_paddings_legacy_example_against_numpy():
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 2, 3, 3))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        return (flow.reflection_pad2d(x, padding=[2, 2, 1, 1]), flow.replication_pad2d(x, [2, 1, 0, 2]),
                flow.constant_pad2d(x, 1, constant_value=1.5), flow.zero_pad2d(x, [0, 1, 2, 0]))

    reflect, replicate, const, zero = job(x)
    np.testing.assert_array_equal(reflect, np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), mode="reflect"))
    np.testing.assert_array_equal(replicate, np.pad(x, ((0, 0), (0, 0), (0, 2), (2, 1)), mode="edge"))
    np.testing.assert_array_equal(const, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=1.5))
    np.testing.assert_array_equal(zero, np.pad(x, ((0, 0), (0, 0), (2, 0), (0, 1))))


def test_reflection_pad2d_gradient_sums_the_copies():
    x = RNG.normal(size=(1, 1, 3, 4)).astype(np.float32)
    w = RNG.normal(size=(1, 1, 5, 7)).astype(np.float32)
    _, dx = _grad_of((1, 1, 3, 4), lambda b: flow.reflection_pad2d(b, [2, 1, 1, 1]), x, w)
    expected = np.zeros_like(x)
    rows = [1, 0, 1, 2, 1]  # reflect about the edge row: -1 -> 1, 3 -> 1
    cols = [2, 1, 0, 1, 2, 3, 2]
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            expected[0, 0, r, c] += w[0, 0, i, j]
    np.testing.assert_allclose(dx, expected, rtol=1e-5, atol=1e-6)


def test_constant_pad2d_on_integers_truncates_the_value():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 1, 2, 2), dtype=flow.int32)) -> tp.Numpy:
        return flow.constant_pad2d(x, [1, 0, 0, 0], constant_value=2.9)

    np.testing.assert_array_equal(job(np.ones((1, 1, 2, 2), np.int32))[0, 0], [[2, 1, 1], [2, 1, 1]])


@pytest.mark.parametrize("fn, padding", [(flow.reflection_pad2d, 3), (flow.replication_pad2d, [0, 0, 0, 3]),
                                         (flow.constant_pad2d, [1, 2]), (flow.zero_pad2d, -1)])
def test_2d_paddings_refuse_what_legacy_asserted(fn, padding):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 1, 3, 3))) -> tp.Numpy:
        return fn(x, padding)

    with pytest.raises(OpBuildError, match=f"flow.{fn.__name__} at .*padding"):
        job(np.zeros((1, 1, 3, 3), np.float32))


def test_same_padding_upper_lower_and_channels_last():
    x = np.ones((1, 1, 3, 3), np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 1, 3, 3))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        upper = flow.same_padding(x, padding="SAME_UPPER", data_format="NCHW", kernel_size=(3, 3),
                                  strides=(1, 1), dilation_rate=(1, 1))
        # kernel 2, stride 2 on 3: total 1, its odd element before (lower) or after (upper)
        lower = flow.same_padding(x, "SAME_LOWER", "NCHW", [2, 2], [2, 2], [1, 1])
        odd_upper = flow.same_padding(x, "same_upper", "NCHW", [2, 2], [2, 2], [1, 1])
        return upper, lower, odd_upper

    upper, lower, odd_upper = job(x)
    np.testing.assert_array_equal(upper, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))))
    np.testing.assert_array_equal(lower, np.pad(x, ((0, 0), (0, 0), (1, 0), (1, 0))))
    np.testing.assert_array_equal(odd_upper, np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1))))

    y = RNG.normal(size=(2, 5, 4, 3)).astype(np.float32)

    @flow.global_function()
    def nhwc(y: tp.Numpy.Placeholder((2, 5, 4, 3))) -> tp.Numpy:
        return flow.same_padding(y, "SAME_LOWER", "NHWC", [3, 2], [2, 1], [2, 1])

    # H 5: out 3, total (3-1)*2 + 5 - 5 = 4 -> (2, 2); W 4: out 4, total 3 + 2 - 4 = 1 -> (1, 0)
    np.testing.assert_array_equal(nhwc(y), np.pad(y, ((0, 0), (2, 2), (1, 0), (0, 0))))


# assign -------------------------------------------------------------------------------------------------------
def test_assign_overwrites_the_variable_after_its_readers():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(3,), initializer=flow.constant_initializer(2.0))
        seen = v * 1.0
        assert flow.assign(v, x) is None
        return seen

    np.testing.assert_array_equal(job(np.array([1, 2, 3], np.float32)), [2, 2, 2])
    np.testing.assert_array_equal(value("v"), [1, 2, 3])
    np.testing.assert_array_equal(job(np.array([4, 5, 6], np.float32)), [1, 2, 3])
    np.testing.assert_array_equal(value("v"), [4, 5, 6])


def test_system_assign_returns_ref_and_other_jobs_see_the_value():
    @flow.global_function()
    def put(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        v = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        ref = flow.system.assign(v, x + 1.0)
        assert ref is v
        return x

    @flow.global_function()
    def get() -> tp.Numpy:
        return flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer()) * 1.0

    put(np.array([1.0, -1.0], np.float32))
    np.testing.assert_array_equal(get(), [2.0, 0.0])


def test_assign_refuses_a_non_variable_and_a_mismatched_value():
    @flow.global_function()
    def not_variable(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        flow.assign(x, x)
        return x

    with pytest.raises(OpBuildError, match="flow.assign at .*ref must be a variable"):
        not_variable(np.zeros(2, np.float32))

    @flow.global_function()
    def mismatch(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        flow.assign(flow.get_variable("z", shape=(2,), initializer=flow.zeros_initializer()), x)
        return x

    with pytest.raises(OpBuildError, match="must match the variable"):
        mismatch(np.zeros(3, np.float32))


# transpose / one_hot / dtype names --------------------------------------------------------------------------
def test_transpose_takes_legacy_arguments_in_legacy_order():
    x = RNG.normal(size=(1, 2, 3)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 2, 3))) -> tp.Numpy:
        return flow.transpose(x, [2, 0, 1], False, True, "t")

    np.testing.assert_array_equal(job(x), x.transpose(2, 0, 1))

    @flow.global_function()
    def conj(x: tp.Numpy.Placeholder((1, 2, 3))) -> tp.Numpy:
        return flow.transpose(x, [2, 0, 1], conjugate=True)

    with pytest.raises(NotImplementedError, match="conjugate"):
        conj(x)


@pytest.mark.parametrize("dtype", [flow.int8, flow.int32, flow.int64, flow.float, flow.double, flow.uint8,
                                   flow.float16])
@pytest.mark.parametrize("index_dtype", [flow.int32, flow.int64])
def test_one_hot_in_every_legacy_dtype(dtype, index_dtype):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,), dtype=index_dtype)) -> tp.Numpy:
        return flow.one_hot(x, depth=5, on_value=7.9, off_value=2, axis=0, dtype=dtype)

    out = job(np.array([0, 3, 1, 4], index_dtype))
    expected = np.full((5, 4), 2, dtype)
    expected[[0, 3, 1, 4], range(4)] = 7 if dtype.kind in "iu" else 7.9  # legacy: int(on_value) for integers
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)


def test_dtype_names():
    assert (flow.int, flow.long, flow.half) == (flow.int32, flow.int64, flow.float16)
    assert isinstance(flow.float, flow.dtype) and isinstance(flow.char, flow.dtype)
    assert flow.dtypes() == [flow.char, flow.float, flow.float32, flow.double, flow.float64, flow.float16,
                             flow.int8, flow.int32, flow.int64, flow.uint8, flow.tensor_buffer]
    assert flow.convert_oneflow_dtype_to_numpy_dtype(flow.float) is np.float32
    assert flow.convert_oneflow_dtype_to_numpy_dtype(flow.char) is np.int8
    assert flow.convert_oneflow_dtype_to_numpy_dtype(flow.double) is np.float64
    with pytest.raises(NotImplementedError):
        flow.convert_oneflow_dtype_to_numpy_dtype(flow.tensor_buffer)  # no numpy scalar type, as legacy
    with pytest.raises(NotImplementedError):
        flow.convert_oneflow_dtype_to_numpy_dtype(np.float32)  # a numpy type, not a flow dtype
    with pytest.raises(NotImplementedError):
        flow.convert_oneflow_dtype_to_numpy_dtype(np.dtype(np.int16))


def test_session_stays_usable_after_a_refused_call():
    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.diag(x, diagonal=1.5)

    with pytest.raises(FlowjobError, match="diagonal must be an int"):
        bad(np.zeros((2, 2), np.float32))

    @flow.global_function()
    def good(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.diag(x)

    np.testing.assert_array_equal(good(np.eye(2, dtype=np.float32)), [1, 1])


def _f32(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def test_size_behaves_like_legacy_shape():
    size = flow.Size([2, 3, 4])
    assert size == (2, 3, 4) and size == flow.Size((2, 3, 4)) and size != [2, 3, 4]
    assert isinstance(size[1:], flow.Size) and size[1:] == (3, 4) and size[-1] == 4
    assert size.numel() == 24 and flow.Size(()).numel() == 1
    assert size.index(4, start=1) == 2 and size.count(3) == 1
    assert repr(size) == str(size) == "flow.Size([2, 3, 4])"
    assert hash(size) == hash((2, 3, 4))
    with pytest.raises(ValueError):
        size.index(2, start=1)
    with pytest.raises(IndexError, match="out of range"):
        size[3]
    with pytest.raises(TypeError, match="flow.Size needs a tuple, a list or a flow.Size, got int"):
        flow.Size(3)
    with pytest.raises(TypeError, match="integer dims"):
        flow.Size([2.5])


def test_size_is_a_shape_in_lazy_programs():
    x = _f32(2, 6)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder(flow.Size([2, 6]))) -> tp.Numpy:
        return flow.reshape(x, flow.Size([3, 4]))

    np.testing.assert_array_equal(job(x), x.reshape(3, 4))


def test_concat_max_dim_size_bounds_the_static_inputs():
    cfg = _helpers.mirrored_config()
    seen = {}

    @flow.global_function(function_config=cfg)
    def job(a: tp.ListNumpy.Placeholder((10, 3)), b: tp.ListNumpy.Placeholder((10, 3))) -> tp.ListNumpy:
        ones = flow.constant(1.0, dtype=flow.float, shape=(4, 3))
        # the dynamic blobs' rows do not count against the bound, as in legacy: only the constant's 4
        out = flow.concat([a, ones, b], axis=0, max_dim_size=12)
        seen["dynamic"] = out.is_dynamic
        return out

    a, b = np.ones((2, 3), np.float32), np.full((3, 3), 2.0, np.float32)
    (out,) = job([a], [b])
    assert seen["dynamic"]
    np.testing.assert_array_equal(out, np.concatenate([a, np.ones((4, 3), np.float32), b]))

    @flow.global_function()
    def static(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.concat(values=[x, x], axis=0, max_dim_size=7)

    with pytest.raises(OpBuildError, match="static inputs add up to 8 along axis 0, more than max_dim_size=7"):
        static(np.ones((4, 3), np.float32))


def test_cast_to_static_shape_ends_dynamic_blobs():
    cfg = _helpers.mirrored_config()
    seen = []

    @flow.global_function(function_config=cfg)
    def job(x: tp.ListNumpy.Placeholder((5, 4))) -> tp.ListNumpy:
        y = flow.cast_to_static_shape(x)
        seen.append((x.is_dynamic, y.is_dynamic, (y + 1.0).is_dynamic))
        return y

    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.testing.assert_array_equal(job([x])[0], x)
    assert seen == [(True, False, False)]


def test_broadcast_to_compatible_with_dynamic_blobs_follows_each_calls_shapes():
    cfg = _helpers.mirrored_config()

    @flow.global_function(function_config=cfg)
    def job(x: tp.ListNumpy.Placeholder((23, 1, 1)), a: tp.ListNumpy.Placeholder((15, 1)),
            b: tp.ListNumpy.Placeholder((8,))) -> tp.ListNumpy:
        return flow.broadcast_to_compatible_with(x, [flow.identity(a), flow.identity(b)])

    rng = np.random.default_rng(4)
    x, a, b = rng.random((20, 1, 1)), rng.random((11, 1)), rng.random((7,))
    (out,) = job([x.astype(np.float32)], [a.astype(np.float32)], [b.astype(np.float32)])
    np.testing.assert_array_equal(out, np.broadcast_to(x.astype(np.float32), (20, 11, 7)))


@pytest.mark.parametrize("static_shape, axis, max_dim_size", [((10,), 0, 30), ((10, 7, 5), 1, 21), ((6, 4), 0, None)])
def test_hybrid_concat_as_legacys_own_test(static_shape, axis, max_dim_size):
    """v0.3.4's test_concat.py _test_hybrid_concat: a variable, two mirrored placeholders and a constant joined
    in a train job; the traced extent is max_dim_size (legacy's static shape), the values the actual rows'."""
    flow.clear_default_session()
    func_config = flow.FunctionConfig()
    func_config.default_logical_view(flow.scope.mirrored_view())
    rand_sub_shape = list(static_shape)
    rand_sub_shape[axis] = 3
    rand_sub_shape = tuple(rand_sub_shape)
    seen = {}

    @flow.global_function(type="train", function_config=func_config)
    def hybrid_concat_job(input_0_def: tp.ListNumpy.Placeholder(shape=static_shape, dtype=flow.float),
                          input_1_def: tp.ListNumpy.Placeholder(shape=static_shape, dtype=flow.float)):
        var = flow.get_variable("var", shape=static_shape, dtype=flow.float,
                                initializer=flow.random_uniform_initializer(), trainable=True)
        constant = flow.constant(1.0, dtype=flow.float, shape=rand_sub_shape)
        inputs = [flow.cast_to_current_logical_view(input) for input in [var, input_0_def, input_1_def, constant]]
        concated = flow.concat(inputs, axis=axis, max_dim_size=max_dim_size)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-3]), momentum=0).minimize(concated)
        flow.watch_diff(var, lambda b: seen.setdefault("var_diff", b.numpy()))
        seen["static"] = concated.shape[axis]
        return var, concated

    whole = np.random.default_rng(3).random(static_shape).astype(np.float32)
    cut = 2 if static_shape[axis] > 4 else 1
    parts = [whole[(slice(None),) * axis + (slice(0, cut),)], whole[(slice(None),) * axis + (slice(cut, cut + 2),)]]
    var, concated = hybrid_concat_job([parts[0]], [parts[1]]).get()
    want_static = static_shape[axis] * 3 + rand_sub_shape[axis] if max_dim_size is None else max_dim_size
    assert seen["static"] == want_static
    want = np.concatenate([var.numpy(), parts[0], parts[1], np.ones(rand_sub_shape, np.float32)], axis=axis)
    np.testing.assert_array_equal(concated.numpy(0), want)
    np.testing.assert_array_equal(seen["var_diff"], np.ones(static_shape, np.float32))


def test_concat_of_selected_rows_past_max_dim_size_fails_naming_the_op_and_the_session_goes_on():
    @flow.global_function()
    def joined_job(x: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        rows = flow.argwhere(x)
        joined = flow.concat([rows, rows], axis=0, max_dim_size=8, name="joined")
        assert joined.shape == (8, 1) and joined.is_dynamic
        return joined + 1

    np.testing.assert_array_equal(joined_job(np.array([1, 0, 1, 0, 0], np.float32)).ravel(), [1, 3, 1, 3])
    with pytest.raises(StepError, match=r"job 'joined_job', op 'joined'.*add up to 10 along axis 0.*max_dim_size=8"):
        joined_job(np.ones(5, np.float32))
    np.testing.assert_array_equal(joined_job(np.array([0, 0, 0, 1, 0], np.float32)).ravel(), [4, 4])
