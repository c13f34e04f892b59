"""Segment sums (legacy v0.4): unsorted_segment_sum, unsorted_segment_sum_like, unsorted_batch_segment_sum.

The segment ids cover ``ids.ndim`` consecutive axes of data from ``axis`` (the batch form: the
first ``ids.ndim`` axes, the last of them per batch position); those axes become one axis of
``num_segments``. An id outside ``[0, num_segments)`` adds nothing (legacy's kernels skip ids past
the end; a negative one aborted legacy's cpu kernel). The gradients are legacy's: a gather of dy
by the ids (batch_gather for the batch form), which needs the ids in range.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError, ShapeTraits


def _check_ids(op: str, ids: BlobSpec) -> None:
    if ids.dtype.kind not in "iu":
        raise ShapeError(f"{op} segment_ids must be integers, got {ids.dtype}")
    if not ids.shape:
        raise ShapeError(f"{op} segment_ids must have rank >= 1")


def _check_int(op: str, what: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ShapeError(f"{op} {what} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _segment_shape(op: str, data: BlobSpec, ids: BlobSpec, axis: Any, num_segments: int) -> tuple[int, ...]:
    _check_ids(op, ids)
    k = len(ids.shape)
    axis = _check_int(op, "axis", axis, 0)
    if axis + k > len(data.shape) or tuple(data.shape[axis:axis + k]) != ids.shape:
        raise ShapeError(f"{op} segment_ids {ids.shape} must match data {data.shape} from axis {axis}")
    return data.shape[:axis] + (num_segments,) + data.shape[axis + k:]


def _segment_sum_kernel(ctx: KernelContext, axis: int, batch_axes: int = 0) -> Any:
    """``run(data, ids)`` summing into ``ctx.out(0)`` along ``axis``; the first ``batch_axes`` axes
    index ids and data together (the batch form)."""
    xp, out = ctx.xp, ctx.out(0)
    shape = ctx.outputs[0].shape
    n = shape[axis]
    # one extra segment collects the ids out of range, so a single add.at serves every id
    # float16 sums are accumulated in float32 and rounded once (legacy's half kernels did the same)
    dtype = np.dtype(np.float32) if ctx.outputs[0].dtype == np.float16 else ctx.outputs[0].dtype
    wide = ctx.scratch(shape[:axis] + (n + 1,) + shape[axis + 1:], dtype=dtype)
    ids_rank = len(ctx.inputs[1].shape)
    lead: tuple[Any, ...] = tuple(
        xp.arange(shape[i]).reshape(tuple(-1 if j == i else 1 for j in range(ids_rank)))
        for i in range(batch_axes)) + (slice(None),) * (axis - batch_axes)
    kept = (slice(None),) * axis + (slice(0, n),)

    def run(data: Any, ids: Any, *like: Any) -> Any:  # the _like form's third input gives only its shape
        wide.fill(0)
        xp.add.at(wide, lead + (xp.where((ids >= 0) & (ids < n), ids, n),), data)
        xp.copyto(out, wide[kept])
        return out

    return run


# unsorted_segment_sum -------------------------------------------------------------
def _sum_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    data, ids = inputs
    n = _check_int("unsorted_segment_sum", "num_segments", attrs.get("num_segments"), 1)
    return [BlobSpec(_segment_shape("unsorted_segment_sum", data, ids, attrs.get("axis", 0), n), data.dtype)]


def _gather_grad(ctx: GradContext) -> Any:
    return ctx.apply("gather", [ctx.dy, ctx.inputs[1]], {"axis": ctx.attrs.get("axis", 0)})


UNSORTED_SEGMENT_SUM = OpDef(
    "unsorted_segment_sum", _sum_infer, kernel=lambda ctx: _segment_sum_kernel(ctx, ctx.attrs.get("axis", 0)),
    grad=lambda ctx: [_gather_grad(ctx), None],
    doc="inputs (data, segment_ids): data summed by segment id into num_segments rows along axis",
    compute=Compute(amp="black"), shape=ShapeTraits(traced_shape_from=()))


# unsorted_segment_sum_like ----------------------------------------------------------
def _like_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    data, ids, like = inputs
    op = "unsorted_segment_sum_like"
    if data.dtype != like.dtype:
        raise ShapeError(f"{op} data {data.dtype} and like {like.dtype} must have one dtype")
    axis = attrs.get("axis", 0)
    if not isinstance(axis, numbers.Integral) or not 0 <= axis < len(like.shape):
        raise ShapeError(f"{op} axis must be an int in 0..{len(like.shape) - 1} for like {like.shape}, got {axis!r}")
    want = _segment_shape(op, data, ids, axis, like.shape[axis])
    if want != like.shape:
        raise ShapeError(f"{op} like {like.shape} does not fit data {data.shape} with segment_ids {ids.shape} "
                         f"at axis {axis}: expected {want[:axis]} + (num_segments,) + {want[axis + 1:]}")
    return [like]


# legacy registered no gradient for the _like form; data's is the same gather, like passes none
UNSORTED_SEGMENT_SUM_LIKE = OpDef(
    "unsorted_segment_sum_like", _like_infer, kernel=lambda ctx: _segment_sum_kernel(ctx, ctx.attrs.get("axis", 0)),
    grad=lambda ctx: [_gather_grad(ctx), None, None],
    doc="inputs (data, segment_ids, like): unsorted_segment_sum shaped like `like` (num_segments from it)",
    compute=Compute(amp="black"))


# unsorted_batch_segment_sum ----------------------------------------------------------
def _batch_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    data, ids = inputs
    op = "unsorted_batch_segment_sum"
    n = _check_int(op, "num_segments", attrs.get("num_segments"), 1)
    _check_ids(op, ids)
    m = len(ids.shape)
    if len(data.shape) < m or tuple(data.shape[:m]) != ids.shape:
        raise ShapeError(f"{op} segment_ids {ids.shape} must match the leading axes of data {data.shape}")
    return [BlobSpec(data.shape[:m - 1] + (n,) + data.shape[m:], data.dtype)]


def _batch_kernel(ctx: KernelContext) -> Any:
    m = len(ctx.inputs[1].shape)
    return _segment_sum_kernel(ctx, m - 1, batch_axes=m - 1)


UNSORTED_BATCH_SEGMENT_SUM = OpDef(
    "unsorted_batch_segment_sum", _batch_infer, kernel=_batch_kernel,
    grad=lambda ctx: [ctx.apply("batch_gather", [ctx.dy, ctx.inputs[1]]), None],
    doc="inputs (data, segment_ids of rank m): per batch position (the first m-1 axes) a segment sum along axis m-1",
    compute=Compute(amp="black"))

OPS = (UNSORTED_SEGMENT_SUM, UNSORTED_SEGMENT_SUM_LIKE, UNSORTED_BATCH_SEGMENT_SUM)
