"""The pieces of ops whose split signature computes differently from the whole op (``Signature.local_op``).

Sparse softmax cross entropy over a class axis split over the ranks: its gradient is this rank's classes'
probabilities less one at the label where this rank holds it, zero rows for labels outside the ``shard_size``
classes (the forward, which needs collectives, is
flowjob-mpi's ``mpi_sparse_softmax_cross_entropy_class_split``).

A table split by rows over the ranks: this rank holds rows ``[shard_start, shard_stop)`` of the gathered axis (the
boxing pass sets both attributes). ``sharded_gather`` gathers the rows it holds and zeros for the others, so the
ranks' results sum to the whole gather (partial sums); ``sharded_gather_grad`` sums dy into the rows it holds.

A mean over an axis split over the ranks: ``sharded_reduce_mean`` sums this rank's piece and divides by the whole
count (``shard_size`` entries along the split axis), so the ranks' results sum to the mean (partial sums).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, KernelContext, OpDef, ShapeError

from flowjob_ops.records import reduce
from flowjob_ops.records.common import kept_dims_shape, normalize_axes, normalize_axis


def _piece(attrs: dict, rows: int, op: str) -> tuple[int, int]:
    start, stop = attrs.get("shard_start"), attrs.get("shard_stop")
    if not isinstance(start, int) or not isinstance(stop, int) or stop - start != rows or start < 0:
        raise ShapeError(f"{op}: shard_start {start!r} and shard_stop {stop!r} must hold the {rows} rows of the piece")
    return start, stop


def _gather_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    params, indices = inputs
    if indices.dtype.kind not in "iu":
        raise ShapeError(f"sharded_gather indices must be integers, got {indices.dtype}")
    axis = normalize_axis(attrs.get("axis", 0), len(params.shape))
    _piece(attrs, params.shape[axis], "sharded_gather")
    return [BlobSpec(params.shape[:axis] + indices.shape + params.shape[axis + 1:], params.dtype)]


def _gather_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.inputs[0].shape))
    start, stop = _piece(ctx.attrs, ctx.inputs[0].shape[axis], "sharded_gather")
    # where an index is not held here: which output entries to zero, broadcast over the gathered row
    held_shape = (1,) * axis + ctx.inputs[1].shape + (1,) * (len(ctx.inputs[0].shape) - axis - 1)

    def run(params: Any, indices: Any) -> Any:
        held = (indices >= start) & (indices < stop)
        xp.take(params, xp.where(held, indices - start, 0), axis=axis, out=out)
        xp.multiply(out, held.reshape(held_shape), out=out)
        return out

    return run


def _gather_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    indices, dy = inputs
    shape = tuple(attrs["shape"])
    axis = normalize_axis(attrs.get("axis", 0), len(shape))
    start, stop = attrs.get("shard_start"), attrs.get("shard_stop")
    if not isinstance(start, int) or not isinstance(stop, int) or not 0 <= start < stop <= shape[axis]:
        raise ShapeError(f"sharded_gather_grad: rows [{start!r}, {stop!r}) are not inside axis {axis} of {shape}")
    if dy.shape != shape[:axis] + indices.shape + shape[axis + 1:]:
        raise ShapeError(f"sharded_gather_grad: dy {dy.shape} does not match gathering {indices.shape} from {shape}")
    return [BlobSpec(shape[:axis] + (stop - start,) + shape[axis + 1:], dy.dtype)]


def _gather_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    shape = tuple(ctx.attrs["shape"])
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(shape))
    start, stop = ctx.attrs["shard_start"], ctx.attrs["shard_stop"]
    rows = stop - start
    wide = ctx.workspace(shape[:axis] + (rows + 1,) + shape[axis + 1:], ctx.outputs[0].dtype)
    lead = (slice(None),) * axis
    kept = lead + (slice(0, rows),)

    def run(indices: Any, dy: Any) -> Any:
        wide.fill(0)  # one extra row collects the indices held by other ranks
        xp.add.at(wide, lead + (xp.where((indices >= start) & (indices < stop), indices - start, rows),), dy)
        xp.copyto(out, wide[kept])
        return out

    return run


def _sparse_ce_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prob, dy = inputs
    if labels.dtype.kind not in "iu" or dy.shape != labels.shape or prob.shape[:-1] != labels.shape:
        raise ShapeError(f"sharded_sparse_softmax_cross_entropy_grad: labels {labels.shape} {labels.dtype}, prob "
                         f"{prob.shape}, dy {dy.shape}")
    start, _ = _piece(attrs, prob.shape[-1], "sharded_sparse_softmax_cross_entropy_grad")
    if not isinstance(attrs.get("shard_size"), int) or attrs["shard_size"] < start + prob.shape[-1]:
        raise ShapeError(f"sharded_sparse_softmax_cross_entropy_grad: shard_size {attrs.get('shard_size')!r} must "
                         f"be the number of classes, at least {start + prob.shape[-1]}")
    return [prob]


def _sparse_ce_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    classes = ctx.inputs[1].shape[-1]
    rows = ctx.outputs[0].size // max(classes, 1)
    start, stop, whole = ctx.attrs["shard_start"], ctx.attrs["shard_stop"], ctx.attrs["shard_size"]
    index = xp.arange(rows)

    def run(labels: Any, prob: Any, dy: Any) -> Any:  # prob * dy, less dy at the label where this rank holds it
        label = labels.reshape(rows)
        dy1 = xp.where((label >= 0) & (label < whole), dy.reshape(rows), 0)  # a label outside the classes: 0 rows
        out2 = out.reshape(rows, classes)
        xp.multiply(prob.reshape(rows, classes), dy1.reshape(rows, 1), out=out2)
        held = (label >= start) & (label < stop)
        out2[index, xp.where(held, label - start, 0)] -= xp.where(held, dy1, 0)
        return out

    return run


SHARDED_GATHER = OpDef("sharded_gather", _gather_infer, kernel=_gather_kernel, not_differentiable=True,
                       doc="inputs (params piece, indices): the rows [shard_start, shard_stop) it holds, zeros for "
                           "the others", compute=Compute(amp="clear"))
SHARDED_GATHER_GRAD = OpDef("sharded_gather_grad", _gather_grad_infer, kernel=_gather_grad_kernel,
                            not_differentiable=True,
                            doc="inputs (indices, dy): dy summed into the rows [shard_start, shard_stop) of shape")

SHARDED_SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD = OpDef(
    "sharded_sparse_softmax_cross_entropy_grad", _sparse_ce_grad_infer, kernel=_sparse_ce_grad_kernel,
    not_differentiable=True,
    doc="inputs (labels, this rank's probabilities of classes [shard_start, shard_stop), dy): the logits' gradient "
        "for those classes")

def _mean_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    start, stop, size = attrs.get("shard_start"), attrs.get("shard_stop"), attrs.get("shard_size")
    if not all(isinstance(v, int) for v in (start, stop, size)) or not 0 <= start < stop <= size:
        raise ShapeError(f"sharded_reduce_mean: shard_start {start!r}, shard_stop {stop!r} and shard_size {size!r} "
                         f"must name this rank's piece of the split axis")
    return reduce.REDUCE_MEAN.infer(inputs, attrs)


def _mean_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    x = ctx.inputs[0]
    axes = normalize_axes(ctx.attrs.get("axis"), len(x.shape))
    kept = out.reshape(kept_dims_shape(x.shape, axes))
    local = math.prod(x.shape[a] for a in axes)
    attrs = ctx.attrs
    scale = x.dtype.type(1.0 / (local * attrs["shard_size"] / (attrs["shard_stop"] - attrs["shard_start"])))

    def run(value: Any) -> Any:
        xp.sum(value, axis=axes, keepdims=True, out=kept)
        xp.multiply(kept, scale, out=kept)
        return out

    return run


SHARDED_REDUCE_MEAN = OpDef("sharded_reduce_mean", _mean_infer, kernel=_mean_kernel, not_differentiable=True,
                            doc="this rank's share of a mean over a split axis: its piece's sum over the whole count "
                                "(attrs of reduce_mean, shard_start, shard_stop, shard_size)",
                            compute=Compute(amp="black"))

OPS = (SHARDED_GATHER, SHARDED_GATHER_GRAD, SHARDED_SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD, SHARDED_REDUCE_MEAN)
