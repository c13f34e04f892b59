"""Lower triangles of the last two axes (legacy v0.4): tril and fused_scale_tril.

Element (i, j) is kept when ``j <= i + diagonal``, else it becomes ``fill_value`` (cast to the
blob's dtype, so an integer blob truncates it as legacy's static_cast did). fused_scale_tril also
multiplies the kept elements by ``scale``; the fill is not scaled. Gradients are legacy's: the
same op on dy with a zero fill.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError


def _check(op: str, x: BlobSpec, attrs: dict) -> None:
    if len(x.shape) < 2:
        raise ShapeError(f"{op} needs an input of rank >= 2, got {x.shape}")
    if x.dtype.kind not in "fiu":
        raise ShapeError(f"{op} needs a numeric input, got {x.dtype}")
    diagonal = attrs.get("diagonal", 0)
    if isinstance(diagonal, bool) or not isinstance(diagonal, numbers.Integral):
        raise ShapeError(f"{op} diagonal must be an int, got {diagonal!r}")
    for what in ("fill_value", "scale"):
        value = attrs.get(what, 0)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ShapeError(f"{op} {what} must be a Python number, got {value!r}")


def _infer(op: str) -> Any:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        _check(op, inputs[0], attrs)
        return [inputs[0]]

    return infer


def _dropped(ctx: KernelContext) -> Any:
    """A (rows, cols) bool mask of the elements above the kept triangle (broadcasts over batches)."""
    xp = ctx.xp
    rows, cols = ctx.inputs[0].shape[-2:]
    diagonal = int(ctx.attrs.get("diagonal", 0))
    return xp.arange(cols)[None, :] > xp.arange(rows)[:, None] + diagonal


def _tril_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dropped = _dropped(ctx)
    fill = out.dtype.type(ctx.attrs.get("fill_value", 0))

    def run(x: Any) -> Any:
        xp.copyto(out, x)
        xp.copyto(out, fill, where=dropped)
        return out

    return run


def _fused_scale_tril_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dropped = _dropped(ctx)
    fill = out.dtype.type(ctx.attrs.get("fill_value", 0))
    scale = out.dtype.type(ctx.attrs.get("scale", 1))

    def run(x: Any) -> Any:
        xp.multiply(x, scale, out=out)
        xp.copyto(out, fill, where=dropped)
        return out

    return run


def _tril_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("tril", [ctx.dy], {"diagonal": ctx.attrs.get("diagonal", 0), "fill_value": 0})]


def _fused_scale_tril_grad(ctx: GradContext) -> list[Any]:
    attrs = {"diagonal": ctx.attrs.get("diagonal", 0), "fill_value": 0, "scale": ctx.attrs.get("scale", 1)}
    return [ctx.apply("fused_scale_tril", [ctx.dy], attrs)]


TRIL = OpDef("tril", _infer("tril"), kernel=_tril_kernel, grad=_tril_grad,
             doc="lower triangle of the last two axes (j <= i + diagonal), fill_value above",
             compute=Compute(amp="clear", intended_inf=True))
FUSED_SCALE_TRIL = OpDef("fused_scale_tril", _infer("fused_scale_tril"), kernel=_fused_scale_tril_kernel,
                         grad=_fused_scale_tril_grad,
                         doc="scale * x in the lower triangle of the last two axes, fill_value above",
                         compute=Compute(amp="gray", intended_inf=True))

OPS = (TRIL, FUSED_SCALE_TRIL)
