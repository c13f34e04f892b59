"""``upsample`` (nearest / bilinear, legacy v0.4 ``flow.layers.upsample_2d``) and its gradient op.

upsample works on NCHW (legacy's op took channels_first only; flow.layers.upsample_2d transposes NHWC
around it). Both interpolations are separable linear maps, y = A_h @ x @ A_w^T, built once per node with
legacy's source indices: nearest reads floor((o + 0.5) / scale); bilinear reads (o + 0.5) / scale - 0.5
clamped at 0, or o * (in - 1) / (out - 1) with align_corners. The gradient is A_h^T @ dy @ A_w, the
scatter-add legacy's kernel made.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import require_floating


# upsample -------------------------------------------------------------------------------
def _upsample_attrs(attrs: dict, op: str) -> tuple[float, float, bool, str]:
    scales = []
    for key in ("height_scale", "width_scale"):
        value = attrs.get(key)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
            raise ShapeError(f"{op}: {key} must be a positive number, got {value!r}")
        scales.append(float(value))
    interpolation = attrs.get("interpolation")
    if interpolation not in ("nearest", "bilinear"):
        raise ShapeError(f'{op}: interpolation must be "nearest" or "bilinear", got {interpolation!r}')
    align = attrs.get("align_corners")
    if not isinstance(align, bool):
        raise ShapeError(f"{op}: align_corners must be a bool, got {align!r}")
    if align and interpolation == "nearest":
        raise ShapeError(f'{op}: interpolation "nearest" does not support align_corners')
    return scales[0], scales[1], align, interpolation


def _upsampled(shape: Sequence[int], attrs: dict, op: str) -> tuple[int, int, int, int]:
    if len(shape) != 4:
        raise ShapeError(f"{op}: x must be NCHW (rank 4), got shape {tuple(shape)}")
    hs, ws, _, _ = _upsample_attrs(attrs, op)
    n, c, h, w = shape
    out = (n, c, int(hs * h), int(ws * w))  # legacy truncated scale * size
    if out[2] < 1 or out[3] < 1:
        raise ShapeError(f"{op}: the scales {hs}, {ws} leave an empty output from {tuple(shape)}")
    return out


def interpolation_matrix(size: int, out_size: int, scale: float, align: bool, interpolation: str) -> np.ndarray:
    """(out_size, size): row o holds the weights output o takes from each input position."""
    matrix = np.zeros((out_size, size))
    rows = np.arange(out_size)
    if interpolation == "nearest":
        # in float32 as legacy's kernel: floor((o + 0.5f) * (1.f / scale))
        source = np.floor((rows.astype(np.float32) + np.float32(0.5)) * (np.float32(1) / np.float32(scale)))
        source = source.astype(np.int64)
        matrix[rows, np.clip(source, 0, size - 1)] = 1.0
        return matrix
    if align:
        step = (size - 1) / (out_size - 1) if out_size > 1 else 0.0
        position = rows * step
    else:
        position = np.maximum((rows + 0.5) / scale - 0.5, 0.0)
    low = np.minimum(np.floor(position).astype(np.int64), size - 1)
    high = np.minimum(np.ceil(position).astype(np.int64), size - 1)
    frac = position - np.floor(position)
    np.add.at(matrix, (rows, low), 1.0 - frac)
    np.add.at(matrix, (rows, high), frac)
    return matrix


def _matrices(ctx: KernelContext, in_shape: Sequence[int], out_shape: Sequence[int], dtype: Any) -> tuple[Any, Any]:
    hs, ws, align, interpolation = _upsample_attrs(ctx.attrs, ctx.op)
    rows = interpolation_matrix(in_shape[2], out_shape[2], hs, align, interpolation)
    cols = interpolation_matrix(in_shape[3], out_shape[3], ws, align, interpolation)
    return ctx.xp.asarray(rows.astype(dtype)), ctx.xp.asarray(cols.T.astype(dtype))


def _upsample_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating(inputs, "upsample")
    return [BlobSpec(_upsampled(x.shape, attrs, "upsample"), x.dtype)]


def _upsample_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    x_spec, y_spec = ctx.inputs[0], ctx.outputs[0]
    rows, cols_t = _matrices(ctx, x_spec.shape, y_spec.shape, x_spec.dtype)
    half = ctx.scratch((*x_spec.shape[:2], y_spec.shape[2], x_spec.shape[3]), x_spec.dtype)

    def run(x: Any) -> Any:
        xp.matmul(rows, x, out=half)
        return xp.matmul(half, cols_t, out=out)

    return run


def _upsample_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("upsample_grad", [ctx.dy, ctx.inputs[0]], dict(ctx.attrs))]


def _upsample_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, x = inputs
    require_floating(inputs, "upsample_grad")
    expected = BlobSpec(_upsampled(x.shape, attrs, "upsample_grad"), x.dtype)
    if dy != expected:
        raise ShapeError(f"upsample_grad: dy {dy} must be the upsampled {expected}")
    return [x]


def _upsample_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dy_spec, x_spec = ctx.inputs
    rows, cols_t = _matrices(ctx, x_spec.shape, dy_spec.shape, x_spec.dtype)
    rows_t, cols = rows.T.copy(), cols_t.T.copy()
    half = ctx.scratch((*x_spec.shape[:2], x_spec.shape[2], dy_spec.shape[3]), x_spec.dtype)

    def run(dy: Any, x: Any) -> Any:
        xp.matmul(rows_t, dy, out=half)
        return xp.matmul(half, cols, out=out)

    return run


UPSAMPLE = OpDef("upsample", _upsample_infer, kernel=_upsample_kernel, grad=_upsample_grad,
                 doc="NCHW nearest or bilinear upsampling by (height_scale, width_scale), legacy's source indices",
                 compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="Upsample2D"))
UPSAMPLE_GRAD = OpDef("upsample_grad", _upsample_grad_infer, kernel=_upsample_grad_kernel, not_differentiable=True,
                      doc="dx: each output's gradient added back to the inputs it read")


OPS = (UPSAMPLE, UPSAMPLE_GRAD)
