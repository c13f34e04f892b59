"""Ops whose row count the data decide: argwhere and sync_dynamic_resize (legacy dynamic blobs).

Each declares ``dynamic_extent``: its spec is the maximum (argwhere: one row per element), and
its kernel returns a view of the first rows holding data; the planner rebuilds every reader for
the actual shape (``flowjob_core/plan/extent.py``). Both are index/selection ops without a gradient,
as in legacy.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, LegacyFace, OpDef, ShapeError, ShapeTraits

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))  # legacy registered argwhere for these


# argwhere ---------------------------------------------------------------------------------
def _argwhere_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    dtype = np.dtype(attrs.get("dtype", np.int32))
    if dtype not in INDEX_DTYPES:
        raise ShapeError(f"argwhere dtype must be int32 or int64, got {dtype}")
    return [BlobSpec((x.size, len(x.shape)), dtype)]


def _argwhere_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        found = xp.argwhere(x)  # (count, ndim), row-major order as legacy's
        rows = out[: found.shape[0]]
        rows[...] = found
        return rows

    return run


ARGWHERE = OpDef("argwhere", _argwhere_infer, kernel=_argwhere_kernel, not_differentiable=True,
                 doc="coordinates of the nonzero elements, one row each in row-major order; as many rows as "
                     "the data hold (the planned shape is one row per element)", compute=Compute(amp="black"),
                 shape=ShapeTraits(dynamic_extent=True), legacy=LegacyFace(name_prefix="ArgWhere"))


# sync_dynamic_resize ----------------------------------------------------------------------
def _resize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, size = inputs
    if not x.shape:
        raise ShapeError("sync_dynamic_resize needs an input of rank >= 1 (it keeps the leading rows)")
    if size.size != 1 or size.dtype.kind not in "iu":
        raise ShapeError(f"sync_dynamic_resize size must be one integer, got {size.shape}:{size.dtype}")
    axis = attrs.get("axis", 0)
    if axis != 0 or isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ShapeError(f"sync_dynamic_resize resizes axis 0 only (as legacy), got axis={axis!r}")
    return [BlobSpec(x.shape, x.dtype)]


def _resize_kernel(ctx: KernelContext) -> Any:
    limit = ctx.inputs[0].shape[0]

    def run(x: Any, size: Any) -> Any:
        n = int(size.reshape(-1)[0])  # one device-to-host read on the gpu: legacy's "sync"
        if not 0 <= n <= limit:
            raise ValueError(f"sync_dynamic_resize size {n} is outside [0, {limit}] (the input's rows)")
        return x[:n]

    return run


SYNC_DYNAMIC_RESIZE = OpDef("sync_dynamic_resize", _resize_infer, kernel=_resize_kernel, not_differentiable=True,
                            doc="the first size[0] rows of the input (a view); planned at the input's shape",
                            compute=Compute(amp="black"), effects=Effects(view=True),
                            shape=ShapeTraits(dynamic_extent=True))

OPS = (ARGWHERE, SYNC_DYNAMIC_RESIZE)
