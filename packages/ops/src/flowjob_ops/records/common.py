"""Helpers shared by op records: dtype checks, broadcasting, axes, attributes, scalars."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, ShapeError
from flowjob_core.ir import dtypes


def same_as_first(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def require_floating(inputs: Sequence[BlobSpec], op: str) -> None:
    for i, spec in enumerate(inputs):
        if spec.dtype.kind != "f":
            raise ShapeError(f"{op} needs floating inputs, input {i} is {spec.dtype}")


def unary_float(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    require_floating(inputs[:1], "this op")
    return [inputs[0]]


def unary_numeric(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0].dtype.kind not in "fiu":
        raise ShapeError(f"this op needs a numeric input, got {inputs[0].dtype}")
    return [inputs[0]]


def grad_like_second(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    """For fused gradient ops ``op_grad(saved, dy)``: the result is shaped like ``dy``."""
    return [inputs[1]]


def broadcast_shape(a: Sequence[int], b: Sequence[int], what: str = "operands") -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ShapeError(f"{what} do not broadcast: shapes {tuple(a)} and {tuple(b)}") from None


def same_dtype(inputs: Sequence[BlobSpec], op: str) -> np.dtype:
    first = inputs[0].dtype
    for spec in inputs[1:]:
        if spec.dtype != first:
            raise ShapeError(f"{op} needs inputs of one dtype, got {first} and {spec.dtype} (use flow.cast)")
    return first


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def int_list(value: Any, what: str) -> tuple[int, ...]:
    try:
        items = tuple(value)
    except TypeError:
        raise ShapeError(f"{what} must be a sequence of ints, got {value!r}") from None
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in items):
        raise ShapeError(f"{what} must be a sequence of ints, got {value!r}")
    return tuple(int(v) for v in items)


def dtype_attr(value: Any, default: np.dtype = dtypes.float32) -> np.dtype:
    """A ``dtype`` attribute (None: ``default``) as a numpy dtype."""
    try:
        return dtypes.as_dtype(value) if value is not None else default
    except TypeError as exc:
        raise ShapeError(str(exc)) from None


def shape_attr(value: Any) -> tuple[int, ...]:
    """A ``shape`` attribute (an int or ints >= 0) as a tuple."""
    dims = (value,) if isinstance(value, numbers.Integral) else tuple(value)
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in dims):
        raise ShapeError(f"shape must hold non-negative ints, got {value!r}")
    return tuple(int(d) for d in dims)


def normalize_axis(axis: Any, rank: int, what: str = "axis") -> int:
    """``axis`` as a non-negative int, checked against ``rank``."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ShapeError(f"{what} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for a rank-{rank} input (valid: {-rank}..{rank - 1})")
    return int(axis) % rank


def normalize_axes(axis: Any, rank: int) -> tuple[int, ...]:
    """``None`` (all axes), an int or a sequence of ints as a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(rank))
    items = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    axes = tuple(sorted(normalize_axis(a, rank) for a in items))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axis {axis!r} names an axis twice")
    return axes


def check_scalar(value: Any, dtype: np.dtype, op: str) -> None:
    """A Python number usable with a blob of ``dtype`` without changing its dtype."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise ShapeError(f"{op} needs a Python number as scalar, got {value!r}")
    if dtype.kind in "iu" and not float(value).is_integer():
        raise ShapeError(f"{op}: a non-integral scalar {value!r} with an integer blob of dtype {dtype}; cast first")


def typed_scalar(value: Any, dtype: np.dtype) -> Any:
    """The scalar as a numpy scalar of ``dtype``, so kernels never promote (float32 stays float32);
    a scalar rather than a 0-d array, which CuPy ufuncs would refuse."""
    return np.dtype(dtype).type(value)


def kept_dims_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))
