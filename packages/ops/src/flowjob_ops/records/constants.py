"""Ops whose values do not depend on their inputs' values: constants, *_like fills, range.

Constant kernels build their array once and return it every step: kernels never write
their inputs, so nobody can change it (returned values are copied out of the step).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ops.records.common import dtype_attr, is_int, shape_attr


def _zero_grad(ctx: GradContext) -> list[Any]:
    """The output does not change with the input's values: no gradient flows back."""
    return [None] * len(ctx.inputs)


# constant -----------------------------------------------------------------------
def _constant_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    value = np.asarray(attrs.get("value"))
    if value.dtype.kind not in "biuf":
        raise ShapeError(f"constant value must be a number or an array of numbers, got {attrs.get('value')!r}")
    shape = shape_attr(attrs["shape"]) if attrs.get("shape") is not None else value.shape
    try:
        np.broadcast_to(value, shape)
    except ValueError:
        raise ShapeError(f"constant value of shape {value.shape} does not broadcast to shape {shape}") from None
    return [BlobSpec(shape, dtype_attr(attrs.get("dtype")))]


def _constant_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    host = np.broadcast_to(np.asarray(ctx.attrs["value"]).astype(spec.dtype), spec.shape)
    value = ctx.xp.array(host, copy=True)
    return lambda: value


CONSTANT = OpDef("constant", _constant_infer, kernel=_constant_kernel, not_differentiable=True,
                 doc="a fixed array: value broadcast to shape, in dtype (default float32)",
                 compute=Compute(intended_inf=True))


# fills shaped like an input -----------------------------------------------------
def _like_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (like,) = inputs
    value = attrs.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise ShapeError(f"the fill value must be a number, got {value!r}")
    return [BlobSpec(like.shape, dtype_attr(attrs.get("dtype"), like.dtype))]


def _like_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    value = ctx.xp.full(spec.shape, ctx.attrs.get("value", 0), dtype=spec.dtype)
    return lambda like: value


ZEROS_LIKE = OpDef("zeros_like", _like_infer, kernel=_like_kernel, grad=_zero_grad,
                   doc="zeros of the input's shape and dtype", compute=Compute(amp="black"))
CONSTANT_LIKE = OpDef("constant_like", _like_infer, kernel=_like_kernel, grad=_zero_grad,
                      doc="value in the input's shape (and its dtype unless given)",
                      compute=Compute(amp="black", intended_inf=True))


# range -----------------------------------------------------------------------------------------------
def range_length(start: Any, limit: Any, delta: Any) -> int:
    if not all(is_int(v) for v in (start, limit, delta)):
        raise ShapeError(f"range start, limit and delta must be ints, got {start!r}, {limit!r}, {delta!r}")
    if limit <= start:
        raise ShapeError(f"range limit {limit} must be larger than start {start}")
    if not 0 < delta <= limit - start:
        raise ShapeError(f"range delta {delta} must be in [1, limit - start = {limit - start}]")
    return -(-(limit - start) // delta)


def _range_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    length = range_length(attrs.get("start"), attrs.get("limit"), attrs.get("delta"))
    try:
        dtype = dtypes.as_dtype(attrs.get("dtype"))
    except TypeError as exc:
        raise ShapeError(f"range: {exc}") from None
    return [BlobSpec((length,), dtype)]


def _range_kernel(ctx: KernelContext) -> Any:
    a = ctx.attrs
    # a private array, as constant's: the planner's output buffer may be shared with other values
    value = ctx.xp.arange(a["start"], a["limit"], a["delta"]).astype(ctx.outputs[0].dtype)
    return lambda: value


RANGE = OpDef("range", _range_infer, kernel=_range_kernel, not_differentiable=True,
              doc="start, start + delta, ... below limit (ints; limit > start, 0 < delta <= limit - start)")

OPS = (CONSTANT, ZEROS_LIKE, CONSTANT_LIKE, RANGE)
