"""matmul (plain and batched, optional transposes) and bias_add."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import broadcast_shape, normalize_axis, same_dtype


# matmul -------------------------------------------------------------------
def _matmul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    a, b = inputs
    dtype = same_dtype(inputs, "matmul")
    if dtype.kind not in "fiu":
        raise ShapeError(f"matmul needs numeric inputs, got {dtype}")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"matmul needs inputs of rank >= 2, got shapes {a.shape} and {b.shape}")
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    m, ka = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
    if ka != kb:
        raise ShapeError(
            f"matmul inner dimensions differ: a {a.shape}{' transposed' if ta else ''} has {ka} columns, "
            f"b {b.shape}{' transposed' if tb else ''} has {kb} rows")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2], "matmul batch dimensions")
    return [BlobSpec(batch + (m, n), dtype)]


def _matmul_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    # transposed views: BLAS reads them as transposed operands, nothing is copied
    if ta and tb:
        return lambda a, b: xp.matmul(a.swapaxes(-1, -2), b.swapaxes(-1, -2), out=out)
    if ta:
        return lambda a, b: xp.matmul(a.swapaxes(-1, -2), b, out=out)
    if tb:
        return lambda a, b: xp.matmul(a, b.swapaxes(-1, -2), out=out)
    return lambda a, b: xp.matmul(a, b, out=out)


def _mm(ctx: GradContext, a: Any, b: Any, ta: bool = False, tb: bool = False) -> Any:
    return ctx.apply("matmul", [a, b], {"transpose_a": ta, "transpose_b": tb})


def _matmul_grad(ctx: GradContext) -> list[Any]:
    a, b = ctx.inputs
    dy = ctx.dy
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    da = db = None
    # y = op(a) op(b): each case picks the transposes that give the input's own layout
    if not ta and not tb:
        da = _mm(ctx, dy, b, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, a, dy, ta=True) if ctx.needs[1] else None
    elif ta and not tb:
        da = _mm(ctx, b, dy, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, a, dy) if ctx.needs[1] else None
    elif not ta and tb:
        da = _mm(ctx, dy, b) if ctx.needs[0] else None
        db = _mm(ctx, dy, a, ta=True) if ctx.needs[1] else None
    else:
        da = _mm(ctx, b, dy, ta=True, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, dy, a, ta=True, tb=True) if ctx.needs[1] else None
    return [da, db]


MATMUL = OpDef("matmul", _matmul_infer, kernel=_matmul_kernel, grad=_matmul_grad, name_prefix="Matmul",
               doc="op(a) @ op(b), op = transpose of the last two axes when asked; batch axes broadcast")


# bias_add -----------------------------------------------------------------
def bias_axis(data_format: Any, rank: int) -> int:
    """The channel axis bias_add adds along: legacy default 1 (``NC...``), last for ``N...C``."""
    if data_format is None:
        return 1 if rank > 1 else 0
    if not isinstance(data_format, str):
        raise ShapeError(f"bias_add data_format must be a string like 'NCHW' or 'NHWC', got {data_format!r}")
    fmt = data_format.upper()
    if fmt.startswith("NC"):
        return 1
    if fmt.startswith("N") and fmt.endswith("C"):
        return rank - 1
    raise ShapeError(f"bias_add data_format must look like 'NC...' or 'N...C', got {data_format!r}")


def _bias_add_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, bias = inputs
    same_dtype(inputs, "bias_add")
    if not x.shape:
        raise ShapeError("bias_add needs a value of rank >= 1")
    axis = normalize_axis(bias_axis(attrs.get("data_format"), len(x.shape)), len(x.shape))
    if len(bias.shape) != 1 or bias.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"bias_add: bias must have shape ({x.shape[axis]},) to match axis {axis} of value {x.shape}, "
            f"got {bias.shape}")
    return [x]


def _bias_add_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rank = len(ctx.inputs[0].shape)
    axis = bias_axis(ctx.attrs.get("data_format"), rank)
    shape = tuple(ctx.inputs[0].shape[axis] if i == axis else 1 for i in range(rank))
    if axis == rank - 1:
        return lambda x, b: xp.add(x, b, out=out)  # broadcasts as it is
    return lambda x, b: xp.add(x, b.reshape(shape), out=out)


def _bias_add_grad(ctx: GradContext) -> list[Any]:
    rank = len(ctx.inputs[0].shape)
    axis = bias_axis(ctx.attrs.get("data_format"), rank)
    db = None
    if ctx.needs[1]:
        others = [i for i in range(rank) if i != axis]
        db = ctx.apply("reduce_sum", [ctx.dy], {"axis": others, "keepdims": False}) if others else ctx.dy
    return [ctx.dy, db]


BIAS_ADD = OpDef("bias_add", _bias_add_infer, kernel=_bias_add_kernel, grad=_bias_add_grad, name_prefix="BiasAdd",
                 doc="value + bias along the channel axis (1 by default, the last for N...C formats)")

OPS = (MATMUL, BIAS_ADD)
