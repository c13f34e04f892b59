"""Max and average pooling and their gradients: 2-D on ``flowjob_ops.kernels.pool``, 3-D (legacy v0.4
``flow.nn.max_pool3d``, ``avg_pool3d``) on the N-d reference kernels of ``kernels.pool3d``.

Attributes: ``ksize``, ``strides``, ``padding`` ("SAME" = "SAME_LOWER" as legacy, "SAME_UPPER",
"VALID" or explicit pads) and ``data_format``. Max pooling pads with -inf and sends each window's
gradient to its first maximal element; average pooling leaves padding out of the divisor (TF and legacy OneFlow).
These kernels are the reference; the cpu backend overrides max pooling with the cache-blocked
variant of ``flowjob_ops.overrides.cpu.pool`` (same results bit for bit).

The 3-D ops take ``ksize`` and ``strides`` as an int or 1 or 3 ints; ``padding`` as "SAME" (= "SAME_LOWER"
as legacy), "SAME_LOWER", "SAME_UPPER", "VALID", 3 spatial (before, after) pairs, or 5 per-dimension
pairs in ``data_format`` order; ``data_format`` "NCDHW" or "NDHWC". Their gradient ops take the
forward's attributes plus ``x_shape``.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.kernels import padding, pool, pool3d
from flowjob_ops.records.common import require_floating, shape_error


def output_shape(x_shape: Sequence[int], attrs: dict) -> tuple[int, ...]:
    """The pooled shape; raises ValueError naming the argument at fault."""
    fmt = padding.check_data_format(attrs.get("data_format", "NCHW"))
    if len(x_shape) != 4:
        raise ShapeError(f"pooling needs a 4-d {fmt} input, got shape {tuple(x_shape)}")
    ah, aw = padding.SPATIAL_AXES[fmt]
    window = padding.Window2d.create((x_shape[ah], x_shape[aw]), attrs.get("ksize"), attrs.get("strides"), 1,
                                     attrs.get("padding", "VALID"), fmt)
    shape = list(x_shape)
    shape[ah], shape[aw] = window.out_hw
    return tuple(shape)


def kernel_options(ctx: KernelContext) -> dict[str, Any]:
    """The pooling kernel classes' arguments after (xp, x_shape, dtype) for a node."""
    attrs = ctx.attrs
    return {"ksize": attrs["ksize"], "strides": attrs["strides"], "pads": attrs.get("padding", "VALID"),
            "data_format": attrs.get("data_format", "NCHW")}


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating(inputs, "pooling")
    return [BlobSpec(output_shape(x.shape, attrs), x.dtype)]


def _grad_attrs(ctx: GradContext) -> dict[str, Any]:
    return {k: ctx.attrs[k] for k in ("ksize", "strides", "padding", "data_format") if k in ctx.attrs}


# max ------------------------------------------------------------------------
def _max_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool.MaxPool2d(ctx.xp, x.shape, x.dtype, **kernel_options(ctx))


def _max_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("max_pool2d_grad", [ctx.inputs[0], ctx.outputs[0], ctx.dy], _grad_attrs(ctx))]


def _max_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, y, dy = inputs
    want = output_shape(x.shape, attrs)
    if y.shape != want or dy.shape != want:
        raise ShapeError(f"max_pool2d_grad: y {y.shape} and dy {dy.shape} must have the pooled shape {want}")
    return [x]


def _max_grad_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool.MaxPool2dBackward(ctx.xp, x.shape, x.dtype, **kernel_options(ctx))


def _max_relu_grad_kernel(ctx: KernelContext) -> Any:
    """relu_grad(x, max_pool2d_grad(x, y, dy)) as max_pool2d_grad(x, y, dy * (y > 0)).

    Exact: an element gets dy only from windows whose first maximum it is, where x == y,
    so its mask x > 0 equals y > 0; the mask is applied at the pooled size (1/(kh*kw) of x).
    """
    x = ctx.inputs[0]
    return pool.MaxPool2dBackward(ctx.xp, x.shape, x.dtype, relu=True, **kernel_options(ctx))


# average --------------------------------------------------------------------
def _avg_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool.AvgPool2d(ctx.xp, x.shape, x.dtype, **kernel_options(ctx))


def _avg_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("avg_pool2d_grad", [ctx.dy], _grad_attrs(ctx) | {"x_shape": ctx.inputs[0].shape})]


def _avg_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (dy,) = inputs
    want = output_shape(attrs["x_shape"], attrs)
    if dy.shape != want:
        raise ShapeError(f"avg_pool2d_grad: dy {dy.shape} must have the pooled shape {want}")
    return [BlobSpec(attrs["x_shape"], dy.dtype)]


def _avg_grad_kernel(ctx: KernelContext) -> Any:
    return pool.AvgPool2dBackward(ctx.xp, ctx.attrs["x_shape"], ctx.inputs[0].dtype, **kernel_options(ctx))


MAX_POOL2D = OpDef("max_pool2d", _infer, kernel=_max_kernel, grad=_max_grad, name_prefix="MaxPool2D",
                   doc="max over each window (padding never wins)", amp="clear")
MAX_POOL2D_GRAD = OpDef("max_pool2d_grad", _max_grad_infer, kernel=_max_grad_kernel, not_differentiable=True,
                        name_prefix="MaxPool2DGrad",
                        doc="inputs (x, y, dy): each window's dy to its first maximal element")
MAX_POOL2D_RELU_GRAD = OpDef("max_pool2d_relu_grad", _max_grad_infer, kernel=_max_relu_grad_kernel,
                             not_differentiable=True, name_prefix="MaxPool2DReluGrad",
                             doc="inputs (x, y, dy): max_pool2d_grad followed by relu_grad(x, .) in one kernel "
                                 "(the mask taken at the pooled size); made by the fusion pass")
AVG_POOL2D = OpDef("avg_pool2d", _infer, kernel=_avg_kernel, grad=_avg_grad, name_prefix="AvgPool2D",
                   doc="mean over each window's real (unpadded) elements", amp="gray")
AVG_POOL2D_GRAD = OpDef("avg_pool2d_grad", _avg_grad_infer, kernel=_avg_grad_kernel, not_differentiable=True,
                        name_prefix="AvgPool2DGrad", doc="input dy: dy / count spread over each window")


# 3-D max and average pooling (legacy v0.4 flow.nn.max_pool3d, avg_pool3d), on kernels.pool3d ---------
_POOL3D_KEYS = ("ksize", "strides", "padding", "data_format")


def pool3d_geometry(op: str, x_shape: Sequence[int], attrs: dict) -> pool3d.PoolNdGeometry:
    if "ksize" not in attrs or "strides" not in attrs:
        raise ShapeError(f"{op} needs the attributes ksize and strides")
    try:
        return pool3d.PoolNdGeometry(x_shape, attrs["ksize"], attrs["strides"], attrs.get("padding", "VALID"),
                                     attrs.get("data_format", "NCDHW"))
    except ValueError as exc:
        raise shape_error(op, exc) from None


def _pool3d_infer(op: str) -> Any:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        require_floating(inputs, op)
        return [BlobSpec(pool3d_geometry(op, x.shape, attrs).y_shape, x.dtype)]
    return infer


def _pool3d_attrs(ctx: GradContext) -> dict[str, Any]:
    return {k: ctx.attrs[k] for k in _POOL3D_KEYS if k in ctx.attrs}


def _max3d_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool3d.MaxPoolNd(ctx.xp, pool3d_geometry("max_pool3d", x.shape, ctx.attrs), x.dtype, ctx.out(0))


def _max3d_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("max_pool3d_grad", [ctx.inputs[0], ctx.outputs[0], ctx.dy], _pool3d_attrs(ctx))]


def _max3d_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, y, dy = inputs
    require_floating(inputs, "max_pool3d_grad")
    want = pool3d_geometry("max_pool3d_grad", x.shape, attrs).y_shape
    if tuple(y.shape) != want or tuple(dy.shape) != want:
        raise ShapeError(f"max_pool3d_grad: y {tuple(y.shape)} and dy {tuple(dy.shape)} must have the pooled "
                         f"shape {want}")
    return [x]


def _max3d_grad_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool3d.MaxPoolNdBackward(ctx.xp, pool3d_geometry("max_pool3d_grad", x.shape, ctx.attrs), x.dtype,
                                    ctx.out(0))


def _avg3d_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return pool3d.AvgPoolNd(ctx.xp, pool3d_geometry("avg_pool3d", x.shape, ctx.attrs), x.dtype, ctx.out(0))


def _avg3d_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("avg_pool3d_grad", [ctx.dy], _pool3d_attrs(ctx) | {"x_shape": ctx.inputs[0].shape})]


def _avg3d_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (dy,) = inputs
    require_floating(inputs, "avg_pool3d_grad")
    geom = pool3d_geometry("avg_pool3d_grad", attrs["x_shape"], attrs)
    if tuple(dy.shape) != geom.y_shape:
        raise ShapeError(f"avg_pool3d_grad: dy {tuple(dy.shape)} must have the pooled shape {geom.y_shape}")
    return [BlobSpec(geom.x_shape, dy.dtype)]


def _avg3d_grad_kernel(ctx: KernelContext) -> Any:
    dy = ctx.inputs[0]
    return pool3d.AvgPoolNdBackward(ctx.xp, pool3d_geometry("avg_pool3d_grad", ctx.attrs["x_shape"], ctx.attrs),
                                    dy.dtype, ctx.out(0))


MAX_POOL3D = OpDef("max_pool3d", _pool3d_infer("max_pool3d"), kernel=_max3d_kernel, grad=_max3d_grad,
                   name_prefix="MaxPool3D", doc="max over each 3-D window (padding never wins)", amp="clear")


MAX_POOL3D_GRAD = OpDef("max_pool3d_grad", _max3d_grad_infer, kernel=_max3d_grad_kernel, not_differentiable=True,
                        name_prefix="MaxPool3DGrad",
                        doc="inputs (x, y, dy): each window's dy to its first maximal element")


AVG_POOL3D = OpDef("avg_pool3d", _pool3d_infer("avg_pool3d"), kernel=_avg3d_kernel, grad=_avg3d_grad,
                   name_prefix="AvgPool3D", doc="mean over each 3-D window's real (unpadded) elements", amp="gray")


AVG_POOL3D_GRAD = OpDef("avg_pool3d_grad", _avg3d_grad_infer, kernel=_avg3d_grad_kernel, not_differentiable=True,
                        name_prefix="AvgPool3DGrad", doc="input dy: dy / count spread over each window")

OPS = (MAX_POOL2D, MAX_POOL2D_GRAD, MAX_POOL2D_RELU_GRAD, AVG_POOL2D, AVG_POOL2D_GRAD, MAX_POOL3D, MAX_POOL3D_GRAD,
       AVG_POOL3D, AVG_POOL3D_GRAD)
