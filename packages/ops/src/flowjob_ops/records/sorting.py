"""Sorting along the last axis: sort, arg_sort, top_k, in_top_k (legacy v0.4).

Ties keep legacy's order, the lower index first, in both directions: legacy's cpu kernels sort
index lists with a comparator that breaks equal values by index. A descending order is therefore
not the reverse of the ascending one (``[1, 2, 2]`` descending is ``[1, 2, 0]``). The public
functions move another axis last with transposes, as legacy did.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError
from flowjob_core.ir import dtypes

DIRECTIONS = ("ASCENDING", "DESCENDING")


def check_direction(op: str, direction: Any) -> str:
    if direction not in DIRECTIONS:
        raise ShapeError(f"{op} direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}")
    return direction


def _check_sortable(op: str, x: BlobSpec) -> None:
    if not x.shape:
        raise ShapeError(f"{op} needs an input of rank >= 1")
    if x.dtype.kind not in "fiu":
        raise ShapeError(f"{op} needs a numeric input, got {x.dtype}")


def stable_order(xp: Any, x: Any, descending: bool) -> Any:
    """Indices sorting ``x`` along its last axis, equal values by increasing index."""
    if not descending:
        return xp.argsort(x, axis=-1, kind="stable")
    # stable ascending on the reversed row lists equal values by decreasing original index;
    # reading that order backwards gives descending values with equal ones by increasing index
    n = x.shape[-1]
    backwards = xp.argsort(x[..., ::-1], axis=-1, kind="stable")
    return (n - 1) - backwards[..., ::-1]


# sort / arg_sort -----------------------------------------------------------------
def _sort_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _check_sortable("sort", x)
    check_direction("sort", attrs.get("direction", "ASCENDING"))
    return [x]


def _sort_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    descending = ctx.attrs.get("direction", "ASCENDING") == "DESCENDING"

    def run(x: Any) -> Any:
        xp.copyto(out, xp.take_along_axis(x, stable_order(xp, x, descending), axis=-1))
        return out

    return run


def _sort_grad(ctx: GradContext) -> list[Any]:
    # legacy had no gradient for sort; this one is the permutation's transpose: dx[i] is dy at the
    # rank of x[i], the rank being the arg_sort of the arg_sort (a batch_gather along the last axis)
    (x,) = ctx.inputs
    order = ctx.apply("arg_sort", [x], {"direction": ctx.attrs.get("direction", "ASCENDING")})
    rank = ctx.apply("arg_sort", [order], {"direction": "ASCENDING"})
    return [ctx.apply("batch_gather", [ctx.dy, rank])]


def _arg_sort_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _check_sortable("arg_sort", x)
    check_direction("arg_sort", attrs.get("direction", "ASCENDING"))
    return [BlobSpec(x.shape, dtypes.int32)]


def _arg_sort_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    descending = ctx.attrs.get("direction", "ASCENDING") == "DESCENDING"

    def run(x: Any) -> Any:
        xp.copyto(out, stable_order(xp, x, descending), casting="unsafe")
        return out

    return run


SORT = OpDef("sort", _sort_infer, kernel=_sort_kernel, grad=_sort_grad,
             doc="x sorted along its last axis (direction ASCENDING or DESCENDING; stable)",
             compute=Compute(amp="black"))
ARG_SORT = OpDef("arg_sort", _arg_sort_infer, kernel=_arg_sort_kernel, not_differentiable=True,
                 doc="int32 indices sorting x along its last axis; ties by lower index", compute=Compute(amp="black"))


# top_k -------------------------------------------------------------------------
def _check_k(op: str, k: Any, minimum: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < minimum:
        raise ShapeError(f"{op} k must be an int >= {minimum}, got {k!r}")
    return int(k)


def _top_k_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _check_sortable("top_k", x)
    k = _check_k("top_k", attrs.get("k", 1), 1)
    # legacy clips k to the axis length rather than refusing it
    return [BlobSpec(x.shape[:-1] + (min(k, x.shape[-1]),), dtypes.int32)]


def _top_k_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    k = ctx.outputs[0].shape[-1]

    def run(x: Any) -> Any:
        # ``sorted=False`` leaves legacy's order unspecified; the sorted order is one valid answer
        xp.copyto(out, stable_order(xp, x, True)[..., :k], casting="unsafe")
        return out

    return run


TOP_K = OpDef("top_k", _top_k_infer, kernel=_top_k_kernel, not_differentiable=True,
              doc="int32 indices of the k largest values along the last axis, largest first; ties by lower index",
              compute=Compute(amp="black"))


# in_top_k ------------------------------------------------------------------------
def _in_top_k_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    targets, predictions = inputs
    if len(targets.shape) != 1 or targets.dtype.kind not in "iu":
        raise ShapeError(f"in_top_k targets must be a 1-d integer blob, got {targets.shape}:{targets.dtype}")
    if len(predictions.shape) != 2 or predictions.dtype != dtypes.float32:
        raise ShapeError(f"in_top_k predictions must be a 2-d float32 blob, got "
                         f"{predictions.shape}:{predictions.dtype}")
    # legacy's rule: no check that the rows agree (mirrored placeholders declare maxima independently);
    # the kernel reads one row of predictions per target, and refuses a step that feeds fewer rows
    _check_k("in_top_k", attrs.get("k"), 0)
    return [BlobSpec(targets.shape, dtypes.int8)]


def _in_top_k_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rows = ctx.inputs[0].shape[0]
    classes = ctx.inputs[1].shape[1]
    k = int(ctx.attrs["k"])
    row_index = xp.arange(rows)

    def run(targets: Any, all_predictions: Any) -> Any:
        if all_predictions.shape[0] < rows:
            raise ValueError(f"in_top_k: {rows} targets need as many rows of predictions, got "
                             f"{all_predictions.shape[0]}")
        predictions = all_predictions[:rows]
        # as legacy: a target is in the top k when fewer than k classes score strictly higher; a
        # target out of range or a row holding a non-finite score says no
        valid = (targets >= 0) & (targets < classes)
        score = predictions[row_index, xp.where(valid, targets, 0)]
        higher = xp.count_nonzero(predictions > score[:, None], axis=1)
        hit = valid & xp.isfinite(predictions).all(axis=1) & (higher < k)
        xp.copyto(out, hit, casting="unsafe")
        return out

    return run


IN_TOP_K = OpDef("in_top_k", _in_top_k_infer, kernel=_in_top_k_kernel, not_differentiable=True,
                 doc="inputs (targets, predictions): int8 1 where the target is in the top k",
                 compute=Compute(amp="black"))

OPS = (SORT, ARG_SORT, TOP_K, IN_TOP_K)
