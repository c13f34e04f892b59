"""``Elementwise`` descriptors: the one declaration of an elementwise op's arithmetic, from which
the op's kernel is built; and the Blob operators a session without an op package lacks."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from flowjob_core import BlobSpec, Elementwise, FlowjobError, JobFunction, KernelContext, OpDef
from flowjob_core.plugins.builtin_ops import SCALAR_MUL


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def _run(op: OpDef, attrs: dict, *arrays: np.ndarray) -> np.ndarray:
    specs = tuple(BlobSpec(a.shape, a.dtype) for a in arrays)
    return op.kernel(KernelContext(np, None, op.name, "k", attrs, specs, specs[:1]))(*arrays)


@pytest.mark.parametrize("descriptor, attrs, want", [
    (Elementwise("negative"), {}, lambda x: -x),
    (Elementwise("maximum", fixed=0), {}, lambda x: np.maximum(x, 0)),
    (Elementwise("subtract", scalar="s", scalar_first=True), {"s": 1.5}, lambda x: np.float32(1.5) - x),
    (Elementwise("power", scalar="p"), {"p": 2}, lambda x: x ** np.float32(2)),
])
def test_the_kernel_is_the_one_ufunc_call_without_promotion(descriptor: Elementwise, attrs: dict, want: Any) -> None:
    x = np.array([-2.0, -0.5, 0.0, 3.0], np.float32)
    got = _run(OpDef("t", _same, not_differentiable=True, elementwise=descriptor), attrs, x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want(x))


def test_a_binary_descriptor_broadcasts_into_the_output() -> None:
    a, b = np.ones((2, 3), np.float64), np.arange(3.0)
    op = OpDef("t", _same, not_differentiable=True, elementwise=Elementwise("add", arity=2))
    np.testing.assert_array_equal(_run(op, {}, a, b), a + b)


def test_core_scalar_mul_is_declared_by_its_descriptor() -> None:
    assert SCALAR_MUL.elementwise == Elementwise("multiply", scalar="scalar")
    x = np.array([1, 2, 3], np.int32)
    got = _run(SCALAR_MUL, {"scalar": 3.0}, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [3, 6, 9])


@pytest.mark.parametrize("kwargs, message", [
    ({"arity": 3}, "arity must be 1 or 2"),
    ({"scalar": "s", "fixed": 0}, "exclude each other"),
    ({"arity": 2, "fixed": 0}, "needs arity 1"),
    ({"scalar_first": True}, "scalar_first without"),
])
def test_bad_descriptors_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Elementwise("add", **kwargs)


def test_a_descriptor_and_a_hand_kernel_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="op 't': an elementwise descriptor builds the kernel"):
        OpDef("t", _same, kernel=lambda ctx: None, not_differentiable=True, elementwise=Elementwise("exp"))


def test_an_operator_no_installed_package_provides_says_so(session: Any, toy: Any) -> None:
    def job(x):  # type: ignore[no-untyped-def]
        return x > 0

    job.__annotations__ = {"x": toy.Array((3,)), "return": toy.Sync}  # objects, not strings: toy is a fixture

    with pytest.raises(FlowjobError, match=r"operator __gt__ on blob .*no installed op package provides it"):
        JobFunction(job, "predict", None, session).ensure_traced()
