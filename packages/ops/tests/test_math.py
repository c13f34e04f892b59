"""flow.math and the Python operators on blobs, through real global functions."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import math, reduce
from flowjob_core.testing.modules import sibling


run_job = sibling(__file__, "jobs").run_job
RNG = np.random.default_rng(3)


def test_binary_ops_broadcast_like_numpy() -> None:
    a = RNG.normal(size=(2, 1, 4)).astype(np.float32)
    b = RNG.uniform(1, 2, size=(3, 1)).astype(np.float32)
    for fn, ref in ((math.add, np.add), (math.subtract, np.subtract), (math.multiply, np.multiply),
                    (math.divide, np.divide), (math.maximum, np.maximum), (math.minimum, np.minimum)):
        got = run_job(fn, a, b)
        assert got.shape == (2, 3, 4) and got.dtype == np.float32
        np.testing.assert_allclose(got, ref(a, b), rtol=1e-6)


def test_operators_and_python_scalars_keep_the_blob_dtype() -> None:
    x = RNG.uniform(1, 2, size=(3, 4)).astype(np.float32)
    y = RNG.uniform(1, 2, size=(4,)).astype(np.float32)
    cases = {
        "a + b": (lambda a, b: a + b, x + y), "a - 1.5": (lambda a, b: a - 1.5, x - 1.5),
        "2 - a": (lambda a, b: 2 - a, 2 - x), "a * 3": (lambda a, b: a * 3, x * 3),
        "0.5 * a": (lambda a, b: 0.5 * a, 0.5 * x), "a / 4": (lambda a, b: a / 4, x / 4),
        "1 / a": (lambda a, b: 1 / a, 1 / x), "-a": (lambda a, b: -a, -x), "a ** 2": (lambda a, b: a ** 2, x ** 2),
        "3 + a": (lambda a, b: 3 + a, 3 + x), "b / a": (lambda a, b: b / a, y / x),
    }
    for text, (fn, want) in cases.items():
        got = run_job(fn, x, y)
        assert got.dtype == np.float32, text
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=text)


def test_matmul_operator_and_function() -> None:
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    np.testing.assert_allclose(run_job(lambda p, q: p @ q, a, b), a @ b)
    np.testing.assert_allclose(run_job(lambda p, q: math.matmul(p, q, transpose_a=True), a.T.copy(), b), a @ b)
    batched_a, batched_b = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 2, 4))
    np.testing.assert_allclose(run_job(lambda p, q: math.matmul(p, q, transpose_b=True), batched_a, batched_b),
                               batched_a @ batched_b.transpose(0, 2, 1))


def test_matmul_alpha_scales_the_product() -> None:
    # legacy v0.4's alpha (its fused self-attention tests compare against matmul(q, k, alpha=...))
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 2))
    np.testing.assert_allclose(run_job(lambda p, q: math.matmul(p, q, alpha=0.125), a, b), 0.125 * (a @ b),
                               rtol=1e-6)
    with pytest.raises(fc.OpBuildError, match="flow.matmul.*alpha must be a number, got 'x'"):
        run_job(lambda p, q: math.matmul(p, q, alpha="x"), a, b)


def test_integer_arithmetic() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = run_job(lambda a: a * 2 + 1, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x * 2 + 1)


@pytest.mark.parametrize("fn, ref", [(reduce.reduce_sum, np.sum), (reduce.reduce_mean, np.mean),
                                     (reduce.reduce_max, np.max), (reduce.reduce_min, np.min)])
def test_reductions(fn: Any, ref: Any) -> None:
    x = RNG.normal(size=(2, 3, 4))
    for axis in (None, 0, -1, [0, 2]):
        for keepdims in (False, True):
            want = ref(x, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
            got = run_job(lambda a: fn(a, axis=axis, keepdims=keepdims), x)
            assert got.shape == (np.shape(want) or (1,))  # legacy: a reduction of every axis is (1,), never 0-d
            np.testing.assert_allclose(got, want)


def test_unary_functions() -> None:
    x = RNG.uniform(0.5, 2, size=(2, 3))
    for fn, ref in ((math.square, np.square), (math.sqrt, np.sqrt), (math.exp, np.exp), (math.log, np.log),
                    (math.negative, np.negative), (math.reciprocal, np.reciprocal), (math.tanh, np.tanh)):
        np.testing.assert_allclose(run_job(fn, x), ref(x), rtol=1e-12)
    centred = x - 1.0
    np.testing.assert_array_equal(run_job(math.abs, centred), np.abs(centred))
    np.testing.assert_array_equal(run_job(math.sign, centred), np.sign(centred))
    np.testing.assert_allclose(run_job(lambda a: math.pow(a, 1.5), x), x ** 1.5)
    np.testing.assert_allclose(run_job(lambda a, b: math.add_n([a, b, a]), x, x), 3 * x)


@pytest.mark.parametrize("body, pattern", [
    (lambda a, b: a + b, r"\(add\) at .*test_math.py:\d+: add operands do not broadcast: shapes \(2, 3\) and \(4,\)"),
    (lambda a, b: math.matmul(a, a),
     r"matmul inner dimensions differ: a \(2, 3\) has 3 columns, b \(2, 3\) has 2 rows"),
    (lambda a, b: reduce.reduce_sum(a, axis=2), r"\(reduce_sum\).*axis 2 is out of range for a rank-2 input"),
    (lambda a, b: reduce.reduce_sum(a, axis=[0, -2]), r"names an axis twice"),
    (lambda a, b: math.divide(a, math.add(b, b)), r"do not broadcast"),
])
def test_bad_shapes_name_the_op_the_shapes_and_the_users_line(body: Any, pattern: str) -> None:
    @fc.global_function()
    def job(a: tp.Numpy.Placeholder((2, 3)), b: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return body(a, b)

    with pytest.raises(fc.OpBuildError, match=pattern):
        job(np.zeros((2, 3), np.float32), np.zeros(4, np.float32))


def test_mixed_dtypes_and_non_numbers_are_rejected() -> None:
    @fc.global_function()
    def mixed(a: tp.Numpy.Placeholder((2,)), b: tp.Numpy.Placeholder((2,), dtype=np.int32)) -> tp.Numpy:
        return a * b

    with pytest.raises(fc.OpBuildError, match=r"multiply needs inputs of one dtype, got float32 and int32"):
        mixed(np.zeros(2, np.float32), np.zeros(2, np.int32))

    @fc.global_function()
    def array_operand(a: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return math.add(a, np.ones(2))

    with pytest.raises(TypeError, match=r"flow.math.add needs blobs or a blob and a Python number"):
        array_operand(np.zeros(2, np.float32))

    @fc.global_function()
    def fractional(a: tp.Numpy.Placeholder((2,), dtype=np.int32)) -> tp.Numpy:
        return a * 0.5

    with pytest.raises(fc.OpBuildError, match=r"non-integral scalar 0.5 with an integer blob"):
        fractional(np.zeros(2, np.int32))
