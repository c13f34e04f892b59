"""Binary math and logical ops as legacy programs use them: legacy docstring values, mod's sign rules,
floordiv as floor(x / y), pow of two blobs and ``**`` / ``%`` on blobs, the zero conventions of
xdivy/xlogy and of pow's exponent gradient, int8 logical results, and the errors for bad input."""
from __future__ import annotations

from typing import Any

import inspect

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import FlowjobError, OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import math, reduce

probe = sibling(__file__, "grad_probe")
run_job = sibling(__file__, "jobs").run_job


def run_many(fn: Any, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``fn`` (returning a tuple of blobs) as a predict job over one placeholder per array."""

    def many_job(*blobs: Any) -> Any:  # not "job": run_job's job is defined elsewhere
        return tuple(fn(*blobs))

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(a.shape, dtype=a.dtype))
              for i, a in enumerate(arrays)]
    many_job.__signature__ = inspect.Signature(params, return_annotation=tuple[tp.Numpy, ...])  # type: ignore
    return fc.global_function()(many_job)(*arrays)


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def test_legacy_docstring_values() -> None:
    a, b = f32(1, 2, 3), f32(4, 4, 4)
    np.testing.assert_allclose(run_job(math.atan2, a, b), [0.24497867, 0.4636476, 0.6435011], rtol=1e-6)
    np.testing.assert_allclose(run_job(math.pow, f32(2, 3, 4), f32(2, 3, 4)), [4, 27, 256], rtol=1e-6)
    np.testing.assert_array_equal(run_job(math.floordiv, f32(4, 3, 5), f32(3, 2, 2)), [1, 1, 2])
    np.testing.assert_allclose(run_job(math.xdivy, f32(4, 3, 5), f32(3, 2, 2)), [1.3333334, 1.5, 2.5], rtol=1e-6)
    np.testing.assert_allclose(run_job(math.xlogy, f32(2, 2, 2), f32(4, 8, 16)), [2.7725887, 4.158883, 5.5451775],
                               rtol=1e-6)
    got = run_job(math.logical_and, f32(1, 0, 1), f32(0, 0, 1))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [0, 0, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_mod_takes_the_divisors_sign_and_is_the_blob_percent(dtype: Any) -> None:
    x, y = np.array([-7, 7, -7, 7, 6], dtype), np.array([3, 3, -3, -3, 3], dtype)
    got = run_many(lambda a, b: (a % b, math.mod(a, b), a % 3, math.mod(10, b)), x, y)
    for g, want in zip(got, ([2, 1, -1, -2, 0], [2, 1, -1, -2, 0], [2, 1, 2, 1, 0], [1, 1, -2, -2, 1])):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, want)


def test_floordiv_is_floor_of_the_quotient() -> None:
    # numpy's floor_divide gives 9 for 1 // 0.1 (it rounds the exact remainder); legacy floors x / y
    got = run_job(math.floordiv, f32(1.0, -7.0, 7.0), f32(0.1, 2.0, -2.0))
    np.testing.assert_array_equal(got, [10.0, -4.0, -4.0])


def test_pow_of_two_blobs_broadcasts_and_star_star_uses_it() -> None:
    x, y = np.array([[1.5, 2.0], [3.0, 0.5]], np.float32), f32(2.0, -1.0)
    got = run_many(lambda a, b: (a ** b, math.pow(a, b, name="p"), a ** 2), x, y)
    np.testing.assert_allclose(got[0], x ** y, rtol=1e-6)
    np.testing.assert_allclose(got[1], x ** y, rtol=1e-6)
    np.testing.assert_allclose(got[2], x ** 2, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:divide by zero")  # 2 / 0 is inf, as numpy warns for any division
def test_xdivy_and_xlogy_are_zero_where_x_is_zero() -> None:
    x, y = f32(0, 0, 0, 2, 2), f32(0, -1, 3, 0, 4)
    got_div, got_log = run_many(lambda a, b: (math.xdivy(a, b), math.xlogy(a, b)), x, y)
    np.testing.assert_array_equal(got_div[:3], 0)
    assert got_div[3] == np.inf and got_div[4] == 0.5
    np.testing.assert_array_equal(got_log[:3], 0)
    assert got_log[3] == -np.inf and got_log[4] == pytest.approx(2 * np.log(4))


def _grads(op: Any, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw gradients of reduce_sum(op(x, y)) for x and y."""
    session = probe.session_with_probe()
    try:
        def train(a: Any, b: Any) -> Any:
            loss = reduce.reduce_sum(op(a, b))
            fc.add_loss(loss)
            probe.probe(a, "x")
            probe.probe(b, "y")
            return loss

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(n, kind, annotation=tp.Numpy.Placeholder(v.shape)) for n, v in (("a", x), ("b", y))]
        train.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore
        probe.RESULTS.clear()
        probe.job(session)(train)(x, y)
        return probe.RESULTS["x"], probe.RESULTS["y"]
    finally:
        session.close()


def test_xdivy_and_xlogy_gradients_follow_the_zero_convention() -> None:
    x, y = f32(0, 0, 2, -1), f32(2, 0.5, 4, 2)
    dx, dy = _grads(math.xdivy, x, y)
    np.testing.assert_allclose(dx, [0, 0, 0.25, 0.5], rtol=1e-6)
    np.testing.assert_allclose(dy, [0, 0, -2 / 16, 1 / 4], rtol=1e-6)
    dx, dy = _grads(math.xlogy, x, y)
    np.testing.assert_allclose(dx, [0, 0, np.log(4), np.log(2)], rtol=1e-6)
    np.testing.assert_allclose(dy, [0, 0, 0.5, -0.5], rtol=1e-6)


def test_pow_gradients_and_a_zero_exponent_gradient_for_non_positive_bases() -> None:
    x, y = f32(2.0, 0.0, -2.0, 3.0), f32(3.0, 2.0, 2.0, 0.5)
    dx, dy = _grads(math.pow, x, y)
    np.testing.assert_allclose(dx, y * x ** (y - 1), rtol=1e-5)
    np.testing.assert_allclose(dy, [8 * np.log(2), 0, 0, np.sqrt(3) * np.log(3)], rtol=1e-5)


def test_atan2_gradients_broadcast_back() -> None:
    x, y = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32), f32(2.0, -1.0)
    dx, dy = _grads(math.atan2, x, y)
    r2 = x * x + y * y
    np.testing.assert_allclose(dx, y / r2, rtol=1e-5)
    np.testing.assert_allclose(dy, (-x / r2).sum(axis=0), rtol=1e-5)


def test_floordiv_passes_no_gradient_and_mod_refuses_a_training_path() -> None:
    dx, dy = _grads(lambda a, b: math.add(math.floordiv(a, b), math.multiply(a, b)), f32(3, 4), f32(2, 5))
    np.testing.assert_array_equal(dx, [2, 5])  # only the product's: floordiv's gradient is zero
    np.testing.assert_array_equal(dy, [3, 4])
    with pytest.raises(FlowjobError, match=r"\(mod\).*not differentiable"):
        _grads(math.mod, f32(3, 4), f32(2, 2))


def test_logical_ops_give_int8_and_treat_nonzero_as_true() -> None:
    x, y = f32(0, 0, 2, -1), f32(0, 3, 0, 0.5)
    got = run_many(lambda a, b: (math.logical_and(a, b), math.logical_or(a, b), math.logical_xor(a, b),
                                math.logical_not(a)), x, y)
    for g, want in zip(got, ([0, 0, 0, 1], [0, 1, 1, 1], [0, 1, 1, 0], [1, 1, 0, 0])):
        assert g.dtype == np.int8
        np.testing.assert_array_equal(g, want)
    ints = run_job(math.logical_or, np.array([[0], [5]], np.int32), np.array([0, 1], np.int32))
    np.testing.assert_array_equal(ints, [[0, 1], [1, 1]])


def test_squared_difference_names_its_two_nodes_like_legacy() -> None:
    seen: dict[str, str] = {}

    def body(a: Any, b: Any) -> Any:
        out = math.squared_difference(a, b, name="sd")
        seen["lbn"] = out.lbn
        return out

    np.testing.assert_allclose(run_job(body, f32(1, 5), f32(3, 2)), [4, 9])
    assert seen["lbn"].startswith("sd_square/")


def test_bad_input_names_the_op_and_argument() -> None:
    with pytest.raises(OpBuildError, match="floordiv needs floating inputs, input 0 is int32"):
        run_job(math.floordiv, np.array([1], np.int32), np.array([1], np.int32))
    with pytest.raises(OpBuildError, match="atan2 needs inputs of one dtype"):
        run_job(math.atan2, f32(1), np.array([1.0]))
    with pytest.raises(OpBuildError, match="xlogy operands do not broadcast"):
        run_job(math.xlogy, f32(1, 2), f32(1, 2, 3))
    with pytest.raises(OpBuildError, match="mod: a non-integral scalar 0.5"):
        run_job(lambda a: a % 0.5, np.array([1], np.int32))
    with pytest.raises(TypeError, match="flow.math.logical_and needs two blobs"):
        run_job(lambda a: math.logical_and(a, 1), f32(1))
    with pytest.raises(TypeError, match="flow.math.pow needs at least one blob"):
        math.pow(2.0, 3.0)


@pytest.mark.parametrize("fn", [
    lambda a, b: math.atan2(a, b) ** b % b,
    lambda a, b: math.logical_not(math.logical_xor(math.logical_or(a, b), math.logical_and(a, b))),
], ids=["atan2-pow-mod", "logical"])
def test_descriptor_ops_fuse_bitwise_as_the_unfused_ops(fn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.array([[0.0, 1.5, -2.0], [3.0, 0.0, 0.25]], np.float32)
    y = f32(0.5, 1.25, 2.0)
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD

        def job(a: Any, b: Any) -> Any:
            return fn(a, b)

        job.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, kind, annotation=tp.Numpy.Placeholder(v.shape)) for n, v in (("a", x), ("b", y))],
            return_annotation=tp.Numpy)
        function = fc.global_function()(job)
        results[fused] = (function(x, y), [n.op for n in function.plan().order])
    (got, ops), (want, ref_ops) = results[True], results[False]
    assert "elementwise_chain" in ops and "elementwise_chain" not in ref_ops
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
