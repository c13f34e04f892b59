"""Max and average pooling and their gradients, one record family for every rank: ``max_pool2d``,
``avg_pool2d`` (also under the 1-D functions, on a height of 1), ``max_pool3d``, ``avg_pool3d`` (legacy
v0.4 ``flow.nn.max_pool3d``, ``avg_pool3d``), each with its ``<op>_grad``. The rank is the input's
(the op's name says which one it accepts); the reference kernels are the rank-generic ones of
``flowjob_ops.kernels.pool``, which the cpu backend overrides for 2-D
(``flowjob_ops.overrides.cpu.pool_cache_blocked``).

Attributes: ``ksize`` and ``strides`` (an int, or 1 or rank ints), ``padding`` ("SAME" = "SAME_LOWER" as
legacy, "SAME_LOWER", "SAME_UPPER", "VALID", an int, rank spatial entries or rank + 2 per-dimension
pairs in ``data_format`` order; see ``kernels.window``) and ``data_format`` (channels first by default:
"NCHW", "NCDHW"; or channels last). Gradient ops take the forward's attributes, plus ``x_shape`` where
they do not read x. Max pooling pads with -inf and sends each window's gradient to its first maximal
element; average pooling leaves padding out of the divisor (TF and legacy OneFlow).

A pooling variant is one ``PoolVariant`` (its reference kernels, the inputs its gradient reads) and the
records ``pool_records`` makes of it per rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops import layout_rules
from flowjob_ops.kernels import pool
from flowjob_ops.kernels.window import FORMATS
from flowjob_ops.records.common import require_floating

KEYS = ("ksize", "strides", "padding", "data_format")
KernelClass = Callable[..., Any]  # (xp, geometry, dtype, out) -> the kernel's run


def geometry(op: str, x_shape: Sequence[int], attrs: dict, rank: int) -> pool.PoolGeometry:
    """The validated window of a ``rank``-d pooling; its errors name the argument and its value (the tracer adds
    the op)."""
    if "ksize" not in attrs or "strides" not in attrs:
        raise ShapeError(f"{op} needs the attributes ksize and strides")
    fmt = attrs.get("data_format", FORMATS[rank][0])
    if len(x_shape) != rank + 2:
        raise ShapeError(f"{op} needs a {rank + 2}-d {fmt} input, got shape {tuple(x_shape)}")
    try:
        return pool.PoolGeometry(x_shape, attrs["ksize"], attrs["strides"], attrs.get("padding", "VALID"), fmt)
    except ValueError as exc:  # the tracer's error names the op
        raise ShapeError(str(exc)) from None


def output_shape(x_shape: Sequence[int], attrs: dict) -> tuple[int, ...]:
    """The pooled shape of a 2-D pooling (the fused ``conv2d_bias_pool``'s)."""
    return geometry("max_pool2d", x_shape, attrs, 2).y_shape


def kernel_options(ctx: KernelContext) -> dict[str, Any]:
    """A 2-D node's arguments of the cpu backend's pooling kernel classes after (xp, x_shape, dtype)."""
    attrs = ctx.attrs
    return {"ksize": attrs["ksize"], "strides": attrs["strides"], "pads": attrs.get("padding", "VALID"),
            "data_format": attrs.get("data_format", "NCHW")}


@dataclass(frozen=True)
class PoolVariant:
    """One kind of pooling: its reference kernels (``kernels.pool``) and what its gradient reads."""

    kind: str  # the op names: f"{kind}_pool{rank}d" and f"{kind}_pool{rank}d_grad"
    forward: KernelClass  # called with x
    backward: KernelClass  # called with the gradient op's inputs
    grad_reads_forward: bool  # the gradient op's inputs: (x, y, dy), else (dy) with attribute x_shape
    amp: str
    doc: str  # what the forward computes, "over each window" included
    grad_doc: str


def pool_records(variant: PoolVariant, rank: int) -> tuple[OpDef, OpDef]:
    """The forward and gradient records of ``variant`` for ``rank`` spatial axes."""
    name = f"{variant.kind}_pool{rank}d"
    grad_name = f"{name}_grad"
    prefix = f"{variant.kind.capitalize()}Pool{rank}D"

    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        require_floating(inputs, name)
        return [BlobSpec(geometry(name, x.shape, attrs, rank).y_shape, x.dtype)]

    def kernel(ctx: KernelContext) -> Any:
        x = ctx.inputs[0]
        return variant.forward(ctx.xp, geometry(name, x.shape, ctx.attrs, rank), x.dtype, ctx.out(0))

    def grad(ctx: GradContext) -> list[Any]:
        attrs = {k: ctx.attrs[k] for k in KEYS if k in ctx.attrs}
        if variant.grad_reads_forward:
            return [ctx.apply(grad_name, [ctx.inputs[0], ctx.outputs[0], ctx.dy], attrs)]
        return [ctx.apply(grad_name, [ctx.dy], attrs | {"x_shape": ctx.inputs[0].shape})]

    def grad_geometry(inputs: Sequence[BlobSpec], attrs: dict) -> pool.PoolGeometry:
        if variant.grad_reads_forward:
            return geometry(grad_name, inputs[0].shape, attrs, rank)
        if "x_shape" not in attrs:
            raise ShapeError(f"{grad_name} needs the attribute x_shape")
        return geometry(grad_name, attrs["x_shape"], attrs, rank)

    def grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        require_floating(inputs, grad_name)
        geom = grad_geometry(inputs, attrs)
        pooled = inputs[1:] if variant.grad_reads_forward else inputs
        if any(tuple(p.shape) != geom.y_shape for p in pooled):
            got = " and ".join(str(tuple(p.shape)) for p in pooled)
            raise ShapeError(f"{grad_name}: {'y and dy' if len(pooled) > 1 else 'dy'} {got} must have the pooled "
                             f"shape {geom.y_shape}")
        return [BlobSpec(geom.x_shape, inputs[0].dtype)]

    def grad_kernel(ctx: KernelContext) -> Any:
        geom = grad_geometry(ctx.inputs, ctx.attrs)
        return variant.backward(ctx.xp, geom, ctx.inputs[0].dtype, ctx.out(0))

    forward = OpDef(name, infer, kernel=kernel, grad=grad, doc=f"{variant.doc} over each {rank}-D window",
                    compute=Compute(amp=variant.amp, host_split=True, layouts=layout_rules.pool),
                    legacy=LegacyFace(name_prefix=prefix))
    backward = OpDef(grad_name, grad_infer, kernel=grad_kernel, not_differentiable=True, doc=variant.grad_doc,
                     compute=Compute(host_split=True, layouts=layout_rules.pool),
                     legacy=LegacyFace(name_prefix=f"{prefix}Grad"))
    return forward, backward


MAX = PoolVariant("max", pool.MaxPool, pool.MaxPoolBackward, True, "clear", "max (padding never wins)",
                  "inputs (x, y, dy): each window's dy to its first maximal element")
AVG = PoolVariant("avg", pool.AvgPool, pool.AvgPoolBackward, False, "gray", "mean of the real (unpadded) elements",
                  "input dy: dy / count spread over each window")

MAX_POOL2D, MAX_POOL2D_GRAD = pool_records(MAX, 2)
AVG_POOL2D, AVG_POOL2D_GRAD = pool_records(AVG, 2)
MAX_POOL3D, MAX_POOL3D_GRAD = pool_records(MAX, 3)
AVG_POOL3D, AVG_POOL3D_GRAD = pool_records(AVG, 3)


def _max_relu_grad_kernel(ctx: KernelContext) -> Any:
    """relu_grad(x, max_pool2d_grad(x, y, dy)) as max_pool2d_grad(x, y, dy * (y > 0)) (see
    ``kernels.pool.MaxPoolBackward``); the mask is applied at the pooled size."""
    x = ctx.inputs[0]
    return pool.MaxPoolBackward(ctx.xp, geometry("max_pool2d_relu_grad", x.shape, ctx.attrs, 2), x.dtype,
                                ctx.out(0), relu=True)


MAX_POOL2D_RELU_GRAD = OpDef("max_pool2d_relu_grad", MAX_POOL2D_GRAD.infer, kernel=_max_relu_grad_kernel,
                             not_differentiable=True,
                             doc="inputs (x, y, dy): max_pool2d_grad followed by relu_grad(x, .) in one kernel "
                                 "(the mask taken at the pooled size); made by the fusion pass",
                             compute=Compute(layouts=layout_rules.pool, host_split=True),
                             legacy=LegacyFace(name_prefix="MaxPool2DReluGrad"))

OPS = (MAX_POOL2D, MAX_POOL2D_GRAD, MAX_POOL2D_RELU_GRAD, AVG_POOL2D, AVG_POOL2D_GRAD, MAX_POOL3D, MAX_POOL3D_GRAD,
       AVG_POOL3D, AVG_POOL3D_GRAD)
