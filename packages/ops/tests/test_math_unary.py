"""The legacy flow.math unary functions through real global functions: legacy values and names, the
accuracy of the erf/lgamma kernels, zero gradients where legacy had them, and fusion of the ufunc ops.
(The conformance suite checks each op against numpy and its gradient by finite differences.)"""
from __future__ import annotations

import math as pymath
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import initializers, math, reduce
from flowjob_ops.kernels.special_functions import ErrorFunctions, GammaFunctions

run_job = sibling(__file__, "jobs").run_job
probe = sibling(__file__, "grad_probe")

EULER_GAMMA = 0.5772156649015329


@pytest.mark.parametrize("fn, x, want", [
    # values printed in legacy OneFlow's docstring examples (float32)
    (math.erf, [1, 2, 3], [0.8427008, 0.9953223, 0.9999779]),
    (math.erfc, [1, 2, 3], [1.5729921e-01, 4.6777353e-03, 2.2090495e-05]),
    (math.lgamma, [1.3, 1.5, 2.7], [-0.1081748, -0.12078223, 0.4348206]),
    (math.log_sigmoid, [1.3, 1.5, 2.7], [-0.24100842, -0.20141333, -0.0650436]),
    (math.softplus, [-1, 0, 1], [0.31326166, 0.6931472, 1.3132616]),
    (math.rint, [1.49999, 1.500001, 2.7], [1.0, 2.0, 3.0]),
    (math.round, [1.49999, 1.500001, 2.7], [1.0, 2.0, 3.0]),
    (math.reciprocal_no_nan, [0, 2, 4], [0.0, 0.5, 0.25]),
    (math.rsqrt, [4, 16, 25], [0.5, 0.25, 0.2]),
    (math.acosh, [2, 3, 4], [1.316958, 1.7627473, 2.063437]),
    (math.atanh, [0.5, 0.6, 0.7], [0.54930615, 0.6931472, 0.8673005]),
    (math.log1p, [1.3, 1.5, 2.7], [0.8329091, 0.91629076, 1.3083328]),
    (math.expm1, [1, 2, 3], [1.7182819, 6.389056, 19.085537]),
    (math.ceil, [1.3, 1.5, 2.7], [2.0, 2.0, 3.0]),
    (math.floor, [1.3, 1.5, 2.7], [1.0, 1.0, 2.0]),
    (math.sigmoid_v2, [-0.5, 0, 0.5], [0.37754068, 0.5, 0.62245935]),
    (math.tanh_v2, [-1, 0, 1], [-0.7615942, 0.0, 0.7615942]),
    (math.relu, [-1, 0, 2], [0.0, 0.0, 2.0]),
])
def test_legacy_examples(fn: Any, x: list, want: list) -> None:
    got = run_job(fn, np.array(x, np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.array(want, np.float32), rtol=2e-6, atol=1e-7)


def test_round_and_rint_take_halves_to_even_like_nearbyint() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], np.float64)
    for fn in (math.round, math.rint):
        np.testing.assert_array_equal(run_job(fn, x), [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0])


def test_unnamed_nodes_take_legacy_names() -> None:
    names: dict[str, str] = {}

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        names["sin"] = math.sin(x).lbn
        names["round"] = math.round(x).lbn
        names["reciprocal_no_nan"] = math.reciprocal_no_nan(x).lbn
        names["sigmoid_v2"] = math.sigmoid_v2(x).lbn
        names["Relu"] = math.relu(x).lbn
        names["given"] = math.erf(x, name="my_erf").lbn
        return x

    job(np.zeros(3, np.float32))
    assert names.pop("given") == "my_erf/out_0"
    for prefix, lbn in names.items():
        node = lbn.split("/")[0]
        assert node.rsplit("_", 1)[0] == prefix and node.rsplit("_", 1)[1].isdigit(), lbn


def test_integer_input_is_refused_naming_the_function_and_argument() -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((3,), dtype=np.int32)) -> tp.Numpy:
        return math.lgamma(x)

    with pytest.raises(fc.OpBuildError, match=r"flow.math.lgamma needs a floating input x, got int32"):
        job(np.zeros(3, np.int32))


def test_softplus_and_log_sigmoid_do_not_overflow() -> None:
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    np.testing.assert_allclose(run_job(math.softplus, x), np.logaddexp(0.0, x), rtol=1e-15)
    np.testing.assert_allclose(run_job(math.log_sigmoid, x), -np.logaddexp(0.0, -x), rtol=1e-15)


def test_erf_and_erfc_are_accurate_in_float64_tails_and_near_zero_included() -> None:
    x = np.concatenate([np.linspace(-6.0, 27.0, 3301), [1e-300, -1e-12, 3e-8, 0.4999999, 0.5]])
    functions, out = ErrorFunctions(np, x.shape, np.float64), np.empty_like(x)
    for method, reference in (("erf", pymath.erf), ("erfc", pymath.erfc)):
        want = np.array([reference(v) for v in x])
        got = getattr(functions, method)(x, out)
        # relative error grows with x^2 (the rounding of exp's argument): ~1e-13 at erfc(11) ~ 1e-54;
        # subnormal results keep fewer digits
        normal = np.abs(want) >= np.finfo(np.float64).tiny
        error = np.abs(got[normal] - want[normal]) / np.abs(want[normal])
        assert np.all(error <= 1e-15 * (4 + x[normal] ** 2)), (method, x[normal][np.argmax(error)], error.max())
        np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=1e-320, err_msg=method)


def test_lgamma_and_digamma_values_poles_and_large_arguments() -> None:
    x = np.linspace(-9.9, 40.0, 4991)
    x = np.concatenate([x[(x > 0) | (np.abs(x - np.rint(x)) > 1e-6)], [1e-200, 1.0, 2.0, 1e15, 1e300]])
    functions, out = GammaFunctions(np, x.shape, np.float64), np.empty_like(x)
    want = np.array([pymath.lgamma(v) for v in x])
    np.testing.assert_allclose(functions.lgamma(x, out), want, rtol=1e-13, atol=5e-14)
    special = np.array([1.0, 0.5, 2.0])
    digamma = GammaFunctions(np, (3,), np.float64).digamma(special, np.empty(3))
    np.testing.assert_allclose(digamma, [-EULER_GAMMA, -EULER_GAMMA - 2 * pymath.log(2.0), 1 - EULER_GAMMA],
                               rtol=1e-14)
    with np.errstate(divide="ignore"):
        poles = GammaFunctions(np, (3,), np.float64).lgamma(np.array([0.0, -1.0, -7.0]), np.empty(3))
    np.testing.assert_array_equal(poles, np.inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_kernels_keep_float32_accurate(dtype: Any) -> None:
    x = np.linspace(-4.5, 8.0, 1001).astype(dtype)
    x = x[np.abs(x - np.rint(x)) > 1e-3]
    for fn, reference in ((math.erf, pymath.erf), (math.erfc, pymath.erfc), (math.lgamma, pymath.lgamma)):
        got = run_job(fn, x)
        assert got.dtype == dtype
        want = np.array([reference(float(v)) for v in x])
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6 if dtype ==
                                   np.float32 else 1e-14, err_msg=fn.__name__)


def _train_grad(fn: Any, x: np.ndarray) -> np.ndarray:
    """d sum(fn(x * w)) / dx at w = 1: fn'(x) for a (1, 3) float32 x (the variable makes it a train job)."""
    session = probe.session_with_probe()
    try:
        @probe.job(session)
        def train(a: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
            w = fc.get_variable("w", shape=(1, 3), initializer=initializers.ones_initializer())
            loss = reduce.reduce_sum(fn(math.multiply(a, w)))
            fc.add_loss(loss)
            probe.probe(a, "x")
            return loss

        probe.RESULTS.clear()
        train(x)
        return probe.RESULTS["x"]
    finally:
        session.close()


def test_gradients_legacy_defines_at_zero_and_on_steps() -> None:
    x = np.array([[0.0, 2.0, -0.5]], np.float32)
    np.testing.assert_allclose(_train_grad(math.reciprocal_no_nan, x), [[0.0, -0.25, -4.0]], rtol=1e-6)
    for step in (math.floor, math.ceil, math.rint, math.round):
        np.testing.assert_array_equal(_train_grad(lambda v, s=step: math.add(s(v), v), x), 1.0)


def test_ufunc_ops_fuse_into_one_chain_bitwise(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-0.9, 0.9, 12).astype(np.float32).reshape(3, 4)
    results, chains = {}, {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()

        @fc.global_function()
        def job(a: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
            return math.atan(math.expm1(math.floor(math.asinh(math.cos(math.sin(a))) * 4.0)))

        results[fused] = job(x)
        chains[fused] = [[step[0] for step in node.attrs["steps"]] for node in job.plan().order
                         if node.op == "elementwise_chain"]
    fc.clear_default_session()
    assert chains == {True: [["sin", "cos", "asinh", "scalar_mul", "floor", "expm1", "atan"]], False: []}
    np.testing.assert_array_equal(results[True], results[False])
    ref = np.arctan(np.expm1(np.floor(np.arcsinh(np.cos(np.sin(x))) * np.float32(4.0))))
    np.testing.assert_allclose(results[True], ref, rtol=1e-6)


def test_ufunc_records_declare_a_descriptor() -> None:
    from flowjob_ops.records import math_unary

    ufunc_ops = {op.name for op in math_unary.OPS if op.elementwise is not None}
    assert ufunc_ops == {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                         "log1p", "expm1", "floor", "ceil", "rint", "round"}
