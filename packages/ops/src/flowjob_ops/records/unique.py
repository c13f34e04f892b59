"""unique_with_counts (legacy ``flow.experimental.unique_with_counts``): the distinct values of a 1-d blob.

Shapes are static as in legacy: ``y`` and ``count`` have the input's length and hold the
``num_unique`` distinct values (and their counts) first, in order of first appearance; ``idx``
maps every input element to its value's place in ``y``. Legacy left the tail of ``y`` and
``count`` unwritten; here it is 0, a valid row of any table, so programs that gather with the
whole of ``y`` (the Wide&Deep hybrid embedding) read in-range rows. Integer outputs, no gradient.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, KernelContext, OpDef, ShapeError

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if len(x.shape) != 1:
        raise ShapeError(f"unique_with_counts needs a 1-d input (flow.flatten it first), got shape {x.shape}")
    out_idx = np.dtype(attrs.get("out_idx", np.int32))
    if out_idx not in INDEX_DTYPES:
        raise ShapeError(f"unique_with_counts out_idx must be int32 or int64, got {out_idx}")
    return [BlobSpec(x.shape, x.dtype), BlobSpec(x.shape, out_idx), BlobSpec(x.shape, out_idx),
            BlobSpec((1,), out_idx)]


def _kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    y, idx, count, num = (ctx.out(i) for i in range(4))

    def run(x: Any) -> tuple[Any, Any, Any, Any]:
        values, first, inverse, counts = xp.unique(x, return_index=True, return_inverse=True, return_counts=True)
        order = xp.argsort(first)  # sorted values -> order of first appearance
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.shape[0])
        k = values.shape[0]
        y[:k] = values[order]
        y[k:] = 0
        idx[...] = rank[inverse.reshape(-1)]
        count[:k] = counts[order]
        count[k:] = 0
        num[0] = k
        return y, idx, count, num

    return run


UNIQUE_WITH_COUNTS = OpDef(
    "unique_with_counts", _infer, kernel=_kernel, not_differentiable=True,
    doc="1-d x -> (y, idx, count, num_unique): distinct values in first-appearance order (tail 0), "
        "each element's place in y, each value's count (tail 0), and how many there are")

OPS = (UNIQUE_WITH_COUNTS,)
