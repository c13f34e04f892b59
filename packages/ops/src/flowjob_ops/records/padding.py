"""Padding: ``pad`` (constant_value around every axis) and ``pad2d`` (reflection or replication of the
last two axes).

Gradients are graph nodes: pad -> slice; pad2d <-> pad2d_grad (an adjoint pair).
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.records.common import check_scalar, int_list, is_int, typed_scalar


# pad ------------------------------------------------------------------------------
def _pad_widths(attrs: dict, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    before = int_list(attrs.get("padding_before"), "pad padding_before")
    after = int_list(attrs.get("padding_after"), "pad padding_after")
    if len(before) != rank or len(after) != rank:
        raise ShapeError(f"pad paddings need one (before, after) pair per axis of the rank-{rank} input, got "
                         f"before={before}, after={after}")
    if any(p < 0 for p in before + after):
        raise ShapeError(f"pad paddings must be >= 0, got before={before}, after={after}")
    return before, after


def _pad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    before, after = _pad_widths(attrs, len(x.shape))
    check_scalar(attrs.get("constant_value", 0), x.dtype, "pad constant_value")
    return [BlobSpec(tuple(d + b + a for d, b, a in zip(x.shape, before, after)), x.dtype)]


def _pad_kernel(ctx: KernelContext) -> Any:
    out = ctx.out(0)
    x = ctx.inputs[0]
    before, _ = _pad_widths(ctx.attrs, len(x.shape))
    inner = tuple(slice(b, b + d) for b, d in zip(before, x.shape))
    fill = typed_scalar(ctx.attrs.get("constant_value", 0), x.dtype)

    def run(value: Any) -> Any:
        out.fill(fill)
        out[inner] = value
        return out

    return run


def _pad_grad(ctx: GradContext) -> list[Any]:
    x = ctx.inputs[0]
    before, _ = _pad_widths(ctx.attrs, len(x.shape))
    return [ctx.apply("slice", [ctx.dy], {"begin": before, "size": x.shape})]


PAD = OpDef("pad", _pad_infer, kernel=_pad_kernel, grad=_pad_grad,
            doc="x surrounded by constant_value: padding_before / padding_after elements per axis",
            compute=Compute(amp="clear", intended_inf=True))


# pad2d: reflection and replication padding (adjoint of pad2d_grad) -----------------------------------
PAD2D_MODES = ("reflect", "replicate")


def _pad2d_geometry(shape: Sequence[int], attrs: dict) -> tuple[str, tuple[int, int, int, int]]:
    mode = attrs.get("mode")
    if mode not in PAD2D_MODES:
        raise ShapeError(f"pad2d mode must be one of {PAD2D_MODES}, got {mode!r}")
    if len(shape) != 4:
        raise ShapeError(f"pad2d takes an NCHW input of rank 4, got shape {tuple(shape)}")
    padding = tuple(attrs.get("padding") or ())
    if len(padding) != 4 or not all(is_int(p) and p >= 0 for p in padding):
        raise ShapeError(f"pad2d padding must be 4 ints >= 0 (left, right, top, bottom), got {padding!r}")
    left, right, top, bottom = (int(p) for p in padding)
    h, w = shape[2], shape[3]
    # reflection needs a row or column to reflect on each side: every pad below the size
    if max(top, bottom) >= h or max(left, right) >= w:
        raise ShapeError(f"pad2d padding {padding} must be smaller than the input's height {h} and width {w}")
    return mode, (left, right, top, bottom)


def _source_positions(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of the padded axis, the input position it copies."""
    k = np.arange(-before, size + after)
    if mode == "reflect":  # mirrored about the edge element, which appears once
        k = np.abs(k)
        k = np.where(k > size - 1, 2 * (size - 1) - k, k)
    return np.clip(k, 0, size - 1)


def _pad2d_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _, (left, right, top, bottom) = _pad2d_geometry(x.shape, attrs)
    n, c, h, w = x.shape
    return [BlobSpec((n, c, h + top + bottom, w + left + right), x.dtype)]


def _pad2d_sources(xp: Any, shape: Sequence[int], attrs: dict) -> tuple[Any, Any]:
    mode, (left, right, top, bottom) = _pad2d_geometry(shape, attrs)
    rows = _source_positions(shape[2], top, bottom, mode)
    cols = _source_positions(shape[3], left, right, mode)
    return xp.asarray(rows[:, None]), xp.asarray(cols[None, :])


def _pad2d_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rows, cols = _pad2d_sources(xp, ctx.inputs[0].shape, ctx.attrs)

    def run(x: Any) -> Any:
        xp.copyto(out, x[:, :, rows, cols])
        return out

    return run


def _pad2d_grad(ctx: GradContext) -> list[Any]:
    attrs = {"mode": ctx.attrs["mode"], "padding": ctx.attrs["padding"], "shape": ctx.inputs[0].shape}
    return [ctx.apply("pad2d_grad", [ctx.dy], attrs)]


def _pad2d_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (dy,) = inputs
    shape = tuple(attrs["shape"])
    (padded,) = _pad2d_infer([BlobSpec(shape, dy.dtype)], attrs)
    if dy.shape != padded.shape:
        raise ShapeError(f"pad2d_grad: dy {dy.shape} is not the padded shape {padded.shape} of {shape}")
    return [BlobSpec(shape, dy.dtype)]


def _pad2d_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rows, cols = _pad2d_sources(xp, ctx.attrs["shape"], ctx.attrs)
    grid = (builtins.slice(None), builtins.slice(None), rows, cols)

    def run(dy: Any) -> Any:
        out.fill(0)
        xp.add.at(out, grid, dy)  # an input element copied to several places collects each gradient
        return out

    return run


def _pad2d_grad_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("pad2d", [ctx.dy], {"mode": ctx.attrs["mode"], "padding": ctx.attrs["padding"]})]


PAD2D = OpDef("pad2d", _pad2d_infer, kernel=_pad2d_kernel, grad=_pad2d_grad,
              doc="NCHW x padded on H and W by (left, right, top, bottom): mode 'reflect' mirrors about the "
                  "edge, 'replicate' repeats the edge", compute=Compute(amp="clear", intended_inf=True))


PAD2D_GRAD = OpDef("pad2d_grad", _pad2d_grad_infer, kernel=_pad2d_grad_kernel, grad=_pad2d_grad_grad,
                   doc="dy of pad2d summed back onto the input positions it copied")

OPS = (PAD, PAD2D, PAD2D_GRAD)
