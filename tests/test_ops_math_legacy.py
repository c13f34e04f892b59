"""flow.math names of legacy v0.4 against numpy and legacy's documented values: clip_by_value (the top-level
function), the counts of non-finite elements, the two-stage reductions, the gradient functions
(gelu_grad, sigmoid_grad, nn.softmax_grad), reduced_shape_elem_cnt, the reflected blob operators
``2 % x`` and ``2.0 ** x``, and integer flow.math.divide."""
from __future__ import annotations

import math

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, sgd, train_grad = _helpers.fresh_session, _helpers.sgd, _helpers.train_grad
run_job = _helpers.run_job


def test_math_clip_by_value_is_the_top_level_function():
    x = np.array([-3.0, 0.5, 4.0], np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.clip_by_value(x, min_value=-1, max_value=1) + flow.clip_by_value(x, max_value=0.0)

    np.testing.assert_array_equal(job(x), np.clip(x, -1, 1) + np.minimum(x, 0))


def test_count_not_finite_and_multi_count():
    a = np.array([1.0, np.inf, np.nan, -np.inf], np.float32)
    b = np.array([[np.nan, 2.0]], np.float32)

    @flow.global_function()
    def job(a: tp.Numpy.Placeholder((4,)), b: tp.Numpy.Placeholder((1, 2))) -> tuple[tp.Numpy, tp.Numpy]:
        return flow.count_not_finite(a), flow.multi_count_not_finite([a, b])

    one, many = job(a, b)
    assert one.dtype == np.int64 and one.tolist() == [3]
    assert many.dtype == np.int64 and many.tolist() == [4]


def test_two_stage_reduce_shares_the_gradient_among_ties():
    x = np.array([[1.0, 5.0, 5.0], [2.0, -1.0, -1.0]], np.float32)
    y, dx = train_grad((2, 3), lambda v: flow.math.two_stage_reduce_max(v, axis=1, keepdims=True), x)
    np.testing.assert_array_equal(y, [[5.0], [2.0]])
    np.testing.assert_array_equal(dx, [[0, 0.5, 0.5], [1, 0, 0]])
    flow.clear_default_session()
    y, dx = train_grad((2, 3), lambda v: flow.math.two_stage_reduce_min(v, axis=[1]), x)
    np.testing.assert_array_equal(y, [1.0, -1.0])
    np.testing.assert_array_equal(dx, [[1, 0, 0], [0, 0.5, 0.5]])


def test_gradient_functions_match_their_ops_gradients():
    x = RNG.normal(size=(2, 5)).astype(np.float32)
    dy = RNG.normal(size=(2, 5)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 5)), dy: tp.Numpy.Placeholder((2, 5))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        s = flow.math.sigmoid(x)
        return (flow.math.gelu_grad(x, dy), flow.math.sigmoid_grad(s, dy),
                flow.nn.softmax_grad(flow.nn.softmax(x, axis=0), dy, axis=0))

    gelu, sigmoid, softmax = job(x, dy)
    erf = np.vectorize(math.erf)
    cdf, pdf = 0.5 * (1 + erf(x / np.sqrt(2))), np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(gelu, dy * (cdf + x * pdf), rtol=1e-5, atol=1e-6)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(sigmoid, dy * s * (1 - s), rtol=1e-5, atol=1e-6)
    p = np.exp(x) / np.exp(x).sum(0)
    np.testing.assert_allclose(softmax, p * (dy - (dy * p).sum(0)), rtol=1e-5, atol=1e-6)


def test_reduced_shape_elem_cnt_legacy_examples():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 4, 5))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return (flow.math.reduced_shape_elem_cnt(x, axis=[0, 1]), flow.math.reduced_shape_elem_cnt(x),
                flow.math.reduced_shape_elem_cnt(x, axis=[-1], dtype=flow.float32))

    some, every, last = job(np.ones((3, 4, 5), np.float32))
    assert some.tolist() == [12] and some.dtype == np.int32
    assert every.tolist() == [60]
    assert last.tolist() == [5.0] and last.dtype == np.float32


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


def _f32(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def test_integer_divide_truncates_toward_zero_with_broadcasting():
    a = np.array([[-7, 7, -1, 1, 0, 9]], np.int32).repeat(2, 0)
    b = np.array([[2], [-3]], np.int32)
    out = run_job(lambda x, y: flow.math.divide(x, y), a, b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[-3, 3, 0, 0, 0, 4], [2, -2, 0, 0, 0, -3]])
    np.testing.assert_array_equal(run_job(lambda x: x / 2, a[:1]), [[-3, 3, 0, 0, 0, 4]])
    np.testing.assert_array_equal(run_job(lambda x: -9 / x, b), [[-4], [3]])


def test_integer_division_by_zero_is_a_clear_error():
    a, zero = np.array([4, 5], np.int32), np.array([1, 0], np.int32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,), dtype=flow.int32), y: tp.Numpy.Placeholder((2,), dtype=flow.int32)
            ) -> tp.Numpy:
        return flow.math.divide(x, y, name="quotient")

    with pytest.raises(FlowjobError, match=r"job 'job', op 'quotient' \(int_divide\).*integer division by zero"):
        job(a, zero)
    np.testing.assert_array_equal(job(a, np.array([2, -2], np.int32)), [2, -2])  # the session still runs
    with pytest.raises(FlowjobError, match="flow.math.divide at .*integer division of .* by the number 0"):
        run_job(lambda x: x / 0, a)


def test_float_divide_is_unchanged():
    x, y = _f32(2, 3), _f32(2, 3, low=0.5, high=2.0)
    np.testing.assert_allclose(run_job(lambda a, b: flow.math.divide(a, b), x, y), x / y, rtol=1e-6)


def test_floordiv_gives_both_inputs_legacys_zero_gradient() -> None:
    x = np.array([[-3.5, 7.0], [2.5, -9.0]], np.float32)
    y = np.array([[2.0, 3.0], [1.5, 4.0]], np.float32)
    out, dx = train_grad(x.shape, lambda xv, y: flow.math.floordiv(xv, y), x, y)
    np.testing.assert_array_equal(out, np.floor(x / y))
    np.testing.assert_array_equal(dx, np.zeros_like(x))  # zeros reach the input: watch_diff sees them
