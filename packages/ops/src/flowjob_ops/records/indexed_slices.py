"""indexed_slices_reduce_sum (legacy ``flow.experimental.indexed_slices_reduce_sum``): the rows of
``x_values`` that share an index in ``x_indices`` summed into one row per distinct index.

Shapes are static as in legacy: ``y_indices`` has one element per index given and ``y_values`` one row per
index; the first ``num_unique`` (a (1,) int64 blob) hold the distinct indices, ascending, and their sums,
the rest are 0. No gradient (legacy used it inside the sparse optimizer updates)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.unique import INDEX_DTYPES


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    indices, values = inputs
    if indices.dtype not in INDEX_DTYPES:
        raise ShapeError(f"indexed_slices_reduce_sum: x_indices must be int32 or int64, got {indices.dtype}")
    count = int(np.prod(indices.shape, dtype=np.int64))
    if values.shape[:len(indices.shape)] != indices.shape:
        raise ShapeError(f"indexed_slices_reduce_sum: x_values {values.shape} must start with the shape of "
                         f"x_indices {indices.shape}")
    row = values.shape[len(indices.shape):]
    return [BlobSpec((count,), indices.dtype), BlobSpec((count,) + row, values.dtype),
            BlobSpec((1,), np.dtype(np.int64))]


def _kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    y_indices, y_values, num = (ctx.out(i) for i in range(3))
    row = ctx.outputs[1].shape[1:]

    def run(indices: Any, values: Any) -> tuple[Any, Any, Any]:
        keys, inverse = xp.unique(indices.reshape(-1), return_inverse=True)
        k = keys.shape[0]
        y_indices[:k] = keys
        y_indices[k:] = 0
        y_values[...] = 0
        xp.add.at(y_values, inverse.reshape(-1), values.reshape((-1,) + row))
        num[0] = k
        return y_indices, y_values, num

    return run


INDEXED_SLICES_REDUCE_SUM = OpDef(
    "indexed_slices_reduce_sum", _infer, kernel=_kernel, not_differentiable=True,
    doc="(indices, values) -> (y_indices, y_values, num_unique): the rows sharing an index summed, distinct "
        "indices ascending first (tail 0)",
    compute=Compute(amp="black"),  # a sum of rows, kept in float32 as the segment sums are
    legacy=LegacyFace(input_names=("x_indices", "x_values"), attr_names=()))

OPS = (INDEXED_SLICES_REDUCE_SUM,)
