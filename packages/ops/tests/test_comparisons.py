"""Comparison ops and the Blob comparison operators: int8 results with broadcasting, Python numbers
as operands, no gradient, and blobs still usable as dict keys although ``==`` builds a node."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import array, comparisons, math, reduce

probe = sibling(__file__, "grad_probe")
X = np.array([[-1.0, 0.0, 0.5], [2.0, 0.5, -3.0]], np.float32)
Y = np.array([0.5, 0.0, 2.0], np.float32)


def _predict(body: Any, *arrays: np.ndarray) -> Any:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder(X.shape), y: tp.Numpy.Placeholder(Y.shape)) -> tuple[tp.Numpy, ...]:
        return tuple(body(x, y))

    return job(*arrays)


def test_operators_compare_blobs_and_numbers_as_int8() -> None:
    got = _predict(lambda x, y: (x > 0, x >= y, x < y, x <= 0.5, x == y, x != 0, 0 < x, 0.5 == x), X, Y)
    want = (X > 0, X >= Y, X < Y, X <= 0.5, X == Y, X != 0, X > 0, X == 0.5)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.int8
        np.testing.assert_array_equal(g, w.astype(np.int8))


def test_public_functions_match_the_operators() -> None:
    fns = (comparisons.greater, comparisons.greater_equal, comparisons.less, comparisons.less_equal,
           comparisons.equal, comparisons.not_equal)
    got = _predict(lambda x, y: [fn(x, y) for fn in fns] + [comparisons.greater(1.0, x)], X, Y)
    refs = (np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal)
    for g, ref in zip(got, refs):
        np.testing.assert_array_equal(g, ref(X, Y).astype(np.int8))
    np.testing.assert_array_equal(got[-1], (1.0 > X).astype(np.int8))


def test_a_fractional_number_against_an_integer_blob_is_refused() -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((3,), dtype=np.int32)) -> tp.Numpy:
        return x > 0.5

    with pytest.raises(OpBuildError, match="greater.*non-integral scalar 0.5"):
        job(np.arange(3, dtype=np.int32))


def test_mixed_dtypes_and_non_numbers_are_refused() -> None:
    @fc.global_function()
    def mixed(x: tp.Numpy.Placeholder((3,)), i: tp.Numpy.Placeholder((3,), dtype=np.int32)) -> tp.Numpy:
        return x < i

    with pytest.raises(OpBuildError, match="less needs inputs of one dtype"):
        mixed(np.zeros(3, np.float32), np.zeros(3, np.int32))

    @fc.global_function()
    def strings(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x < "a"

    with pytest.raises(TypeError, match="'<' not supported"):
        strings(np.zeros(3, np.float32))


def test_blobs_stay_dict_keys_and_set_members_and_equal_none_is_false() -> None:
    seen: dict[str, Any] = {}

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((3,)), y: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        table = {x: "x", y: "y"}
        members = {x, y}
        seen.update(x=table[x], y=table[y], both=len(members), none=(x == None), other=(x != "x"))  # noqa: E711
        return x == y

    got = job(np.array([1, 2, 3], np.float32), np.array([1, 0, 3], np.float32))
    np.testing.assert_array_equal(got, np.array([1, 0, 1], np.int8))
    assert seen == {"x": "x", "y": "y", "both": 2, "none": False, "other": True}


def test_a_comparison_is_marked_not_differentiable_and_a_train_job_flows_around_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    session = probe.session_with_probe()
    try:
        for op in ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal"):
            record = session.registries.ops[op]
            assert record.not_differentiable and record.grad is None and record.elementwise is not None

        @probe.job(session)
        def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            w = fc.get_variable("w", shape=(2, 3), initializer=None)
            mask = array.cast(x > 0, np.float32)  # a gradient stops at the comparison
            loss = reduce.reduce_sum(math.multiply(math.multiply(x, w), mask))
            fc.add_loss(loss)
            probe.probe(x, "x")
            return loss

        probe.RESULTS.clear()
        train(X)
        w = session.variables.get("w")
        np.testing.assert_allclose(probe.RESULTS["x"], w * (X > 0), rtol=1e-6)
    finally:
        session.close()
