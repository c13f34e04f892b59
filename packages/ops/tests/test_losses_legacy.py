"""Losses and reductions as legacy v0.4 programs use them: its docstring values, the axis forms (None, an
int, a list or tuple, an empty list), int8 results of reduce_any/reduce_all, the numerically stable
reduce_logsumexp and reduce_variance, gradients through jobs (reduce_prod at zeros, l2_normalize, the
composed norms) and the errors for bad input."""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import losses, reduce

probe = sibling(__file__, "grad_probe")
run_job = sibling(__file__, "jobs").run_job


def f32(values: Any) -> np.ndarray:
    return np.array(values, np.float32)


def test_legacy_docstring_values() -> None:
    prob = f32([[0.3, 0.7], [0.4, 0.6], [0.5, 0.5], [0.1, 0.9], [0.2, 0.8]])
    labels = np.array([0, 1, 1, 0, 1], np.int32)
    np.testing.assert_allclose(run_job(lambda p, lab: losses.sparse_cross_entropy(lab, p), prob, labels),
                               [1.2039728, 0.5108256, 0.6931472, 2.3025851, 0.22314353], rtol=1e-6)
    # (legacy's examples for the three *_with_logits losses print values that do not follow from their
    # inputs, e.g. 0.6578 for -log softmax([4, 1, 2])[0] = 0.1698; test_nn.py checks those losses)
    got = run_job(lambda x: reduce.l2_normalize(x, axis=0), f32([1, 2, 3, 4]))
    np.testing.assert_allclose(got, [0.18257418, 0.36514837, 0.5477226, 0.73029673], rtol=1e-6)


def test_sparse_cross_entropy_labels_forms_and_clamp() -> None:
    prob = f32([[0.25, 0.75], [1.0, 0.0]])
    for labels in (np.array([[1], [1]], np.int64), np.array([1, 1], np.int32)):  # (N, 1) drops its last axis
        got = run_job(lambda p, lab: losses.sparse_cross_entropy(lab, p), prob, labels)
        assert got.shape == (2,) and got.dtype == np.float32
        # a zero probability is clamped at 1e-20 (legacy's SafeLog): large but finite
        np.testing.assert_allclose(got, [-np.log(0.75), -np.log(np.float32(1e-20))], rtol=1e-6)
    with pytest.raises(OpBuildError, match="sparse_cross_entropy: labels must be integers"):
        run_job(lambda p, lab: losses.sparse_cross_entropy(lab, p), prob, f32([1, 0]))
    with pytest.raises(OpBuildError, match="labels must have the prediction's shape"):
        run_job(lambda p, lab: losses.sparse_cross_entropy(lab, p), prob, np.array([1, 0, 1], np.int32))


X = np.array([[[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [[-2.0, 1.0, 0.5], [0.0, 3.0, -1.25]]], np.float32)


@pytest.mark.parametrize("axis", [None, 1, -1, [0, 2], (2, 0), [0, 1, 2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy_for_every_axis_form(axis: Any, keepdims: bool) -> None:
    np_axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    fns = [(reduce.reduce_prod, lambda a: np.prod(a, np_axis, keepdims=keepdims)),
           (reduce.reduce_logsumexp, lambda a: np.log(np.sum(np.exp(a.astype(np.float64)), np_axis,
                                                             keepdims=keepdims))),
           (reduce.reduce_euclidean_norm,
            lambda a: np.sqrt(np.sum(a.astype(np.float64) ** 2, np_axis, keepdims=keepdims))),
           (reduce.reduce_variance, lambda a: np.var(a.astype(np.float64), np_axis, keepdims=keepdims)),
           (reduce.reduce_std, lambda a: np.std(a.astype(np.float64), np_axis, keepdims=keepdims)),
           (reduce.reduce_sum, lambda a: np.sum(a, np_axis, keepdims=keepdims)),
           (reduce.reduce_mean, lambda a: np.mean(a, np_axis, keepdims=keepdims))]
    for fn, ref in fns:
        got = run_job(lambda x, fn=fn: fn(x, axis, keepdims), X)
        want = ref(X)
        assert got.shape == (np.shape(want) or (1,)) and got.dtype == np.float32, fn.__name__  # legacy: never 0-d
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=fn.__name__)
    for fn, ref in ((reduce.reduce_any, np.any), (reduce.reduce_all, np.all)):
        got = run_job(lambda x, fn=fn: fn(x, axis, keepdims), X)
        assert got.dtype == np.int8 and got.shape == (np.shape(ref(X, np_axis, keepdims=keepdims)) or (1,))
        np.testing.assert_array_equal(got, ref(X != 0, np_axis, keepdims=keepdims))


def test_an_empty_axis_list_reduces_nothing_as_legacy() -> None:
    x = f32([[0.0, 2.0], [-1.0, 0.0]])
    for fn in (reduce.reduce_sum, reduce.reduce_mean, reduce.reduce_max, reduce.reduce_min, reduce.reduce_prod,
               reduce.reduce_logsumexp):
        np.testing.assert_array_equal(run_job(lambda a, fn=fn: fn(a, []), x), x)
    for fn in (reduce.reduce_any, reduce.reduce_all):  # legacy: x != 0
        got = run_job(lambda a, fn=fn: fn(a, []), x)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, [[0, 1], [1, 0]])
    for fn in (reduce.reduce_variance, reduce.reduce_std):  # legacy: zeros_like
        np.testing.assert_array_equal(run_job(lambda a, fn=fn: fn(a, []), x), np.zeros_like(x))


@pytest.mark.filterwarnings("ignore:divide by zero")  # log(0) = -inf for a slice of -inf, as numpy warns
def test_logsumexp_and_variance_are_stable_where_legacys_formulas_were_not() -> None:
    big = f32([[1000.0, 1000.0], [-1000.0, -1e30]])
    got = run_job(lambda a: reduce.reduce_logsumexp(a, axis=1), big)  # legacy: log(sum(exp)) = inf
    np.testing.assert_allclose(got, [1000.0 + np.log(2.0), -1000.0], rtol=1e-6)
    np.testing.assert_array_equal(run_job(lambda a: reduce.reduce_logsumexp(a), f32([-np.inf, -np.inf])), -np.inf)
    shifted = f32(10000.0 + np.array([0.0, 0.5, 1.0, 1.5]))  # mean(x^2) - mean(x)^2 cancels in float32
    np.testing.assert_allclose(run_job(reduce.reduce_variance, shifted), 0.3125, rtol=1e-6)
    np.testing.assert_allclose(run_job(reduce.reduce_std, shifted), np.sqrt(0.3125), rtol=1e-6)


def _grad(fn: Any, x: np.ndarray, *others: np.ndarray) -> np.ndarray:
    """The raw gradient of reduce_sum(fn(x, *others)) for x (others are fed, not differentiated)."""
    session = probe.session_with_probe()
    try:
        def train(a: Any, *rest: Any) -> Any:
            loss = reduce.reduce_sum(fn(a, *rest))
            fc.add_loss(loss)
            probe.probe(a, "x")
            return loss

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(f"a{i}", kind, annotation=tp.Numpy.Placeholder(v.shape, dtype=v.dtype))
                  for i, v in enumerate((x, *others))]
        train.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore
        probe.RESULTS.clear()
        probe.job(session)(train)(x, *others)
        return probe.RESULTS["x"]
    finally:
        session.close()


def test_gradients_through_jobs() -> None:
    x = f32([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, -0.5]])
    # one zero in a row: only the zero gets the others' product; two zeros: nothing
    np.testing.assert_allclose(_grad(lambda a: reduce.reduce_prod(a, axis=1), x),
                               [[0, 6, 0], [0, 0, 0], [-1, -0.5, 2]], rtol=1e-6)
    v = f32([[3.0, 4.0], [1.0, -1.0]])
    np.testing.assert_allclose(_grad(lambda a: reduce.reduce_euclidean_norm(a, axis=1), v),
                               v / np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(_grad(lambda a: reduce.reduce_variance(a, axis=0), v),
                               2 * (v - v.mean(axis=0)) / 2, rtol=1e-6)
    lse = _grad(lambda a: reduce.reduce_logsumexp(a, axis=1), v)  # softmax of each row
    np.testing.assert_allclose(lse, np.exp(v) / np.exp(v).sum(axis=1, keepdims=True), rtol=1e-6)
    # sum(x / |x|) over a row: (1 - y * sum(y)) / |x|; a zero row sits in the epsilon branch: 1 / sqrt(eps)
    w = f32([[3.0, 4.0], [0.0, 0.0]])
    y = w[0] / 5.0
    np.testing.assert_allclose(_grad(lambda a: reduce.l2_normalize(a, axis=1, epsilon=1e-4), w),
                               [(1 - y * y.sum()) / 5.0, [100.0, 100.0]], rtol=1e-5)
    probs = f32([[0.25, 0.75], [0.5, 0.5]])  # -1 / p at the label only
    got = _grad(lambda p, lab: losses.sparse_cross_entropy(lab, p), probs, np.array([1, 0], np.int32))
    np.testing.assert_allclose(got, [[0, -1 / 0.75], [-2, 0]], rtol=1e-6)


def test_signatures_and_node_names_follow_legacy() -> None:
    for fn in (reduce.reduce_max, reduce.reduce_min, reduce.reduce_prod, reduce.reduce_any, reduce.reduce_all):
        assert list(inspect.signature(fn).parameters) == ["x", "axis", "keepdims", "name"]
    for fn in (reduce.reduce_sum, reduce.reduce_mean, reduce.reduce_logsumexp, reduce.reduce_euclidean_norm,
               reduce.reduce_variance, reduce.reduce_std):
        assert list(inspect.signature(fn).parameters) == ["input_tensor", "axis", "keepdims", "name"]
    assert list(inspect.signature(reduce.l2_normalize).parameters) == ["input", "axis", "epsilon", "name"]
    assert list(inspect.signature(losses.sparse_cross_entropy).parameters) == ["labels", "prediction", "name"]
    seen: dict[str, str] = {}

    def body(a: Any) -> Any:
        out = reduce.reduce_euclidean_norm(a, name="norm")
        seen["norm"] = out.lbn
        seen["prod"] = reduce.reduce_prod(a).lbn
        return out

    run_job(body, f32([3.0, 4.0]))
    assert seen["norm"].startswith("norm_sqrt/") and seen["prod"].startswith("ReduceProd_")


def test_bad_input_names_the_op_and_argument() -> None:
    with pytest.raises(OpBuildError, match="l2_normalize.*axis must be an int, got None"):
        run_job(lambda a: reduce.l2_normalize(a), f32([1.0]))
    with pytest.raises(OpBuildError, match="l2_normalize.*epsilon must be a number >= 0"):
        run_job(lambda a: reduce.l2_normalize(a, 0, epsilon=-1.0), f32([1.0]))
    with pytest.raises(OpBuildError, match="reduce_any.*axis must be None, an int or a list of ints"):
        run_job(lambda a: reduce.reduce_any(a, axis="0"), f32([1.0]))
    with pytest.raises(OpBuildError, match="reduce_logsumexp needs a floating input_tensor, got int32"):
        run_job(reduce.reduce_logsumexp, np.array([1], np.int32))
    with pytest.raises(OpBuildError, match="axis 2 is out of range|out of range"):
        run_job(lambda a: reduce.reduce_prod(a, axis=2), f32([[1.0]]))
