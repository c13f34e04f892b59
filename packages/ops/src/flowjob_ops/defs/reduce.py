"""Reductions: reduce_sum, reduce_mean, reduce_max, reduce_min.

``axis`` is None (all axes), an int or a list of ints; ``keepdims`` keeps reduced axes as 1.
The gradient of reduce_max/reduce_min is split evenly among tied extrema (as TensorFlow
and legacy OneFlow did), so it is well defined at ties.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import kept_dims_shape, normalize_axes


def _reduced_shape(shape: Sequence[int], attrs: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(axes, output shape) of a reduction of ``shape``."""
    axes = normalize_axes(attrs.get("axis"), len(shape))
    if attrs.get("keepdims", False):
        return axes, kept_dims_shape(shape, axes)
    return axes, tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer(op: str, floating: bool = False) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        if x.dtype.kind not in ("f" if floating else "fiu"):
            raise ShapeError(f"{op} needs a {'floating' if floating else 'numeric'} input, got {x.dtype}")
        axes, shape = _reduced_shape(x.shape, attrs)
        if op in ("reduce_max", "reduce_min") and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{op} over an empty axis of shape {x.shape}")
        return [BlobSpec(shape, x.dtype)]

    return infer


def _kernel(name: str) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        reduce = getattr(xp, name)
        axes, _ = _reduced_shape(ctx.inputs[0].shape, ctx.attrs)
        keepdims = bool(ctx.attrs.get("keepdims", False))
        return lambda x: reduce(x, axis=axes, keepdims=keepdims, out=out)

    return build


def _spread(ctx: GradContext, dy: Any) -> Any:
    """``dy`` (the reduction's shape) broadcast back to the input's shape."""
    x = ctx.inputs[0]
    axes, _ = _reduced_shape(x.shape, ctx.attrs)
    kept = kept_dims_shape(x.shape, axes)
    if dy.shape != kept:
        dy = ctx.apply("reshape", [dy], {"shape": kept})
    if kept == x.shape:
        return dy
    return ctx.apply("broadcast_to", [dy], {"shape": x.shape})


def _sum_grad(ctx: GradContext) -> list[Any]:
    return [_spread(ctx, ctx.dy)]


def _mean_grad(ctx: GradContext) -> list[Any]:
    x, y = ctx.inputs[0], ctx.outputs[0]
    count = x.spec.size // max(y.spec.size, 1)
    return [_spread(ctx, ctx.apply("scalar_mul", [ctx.dy], {"scalar": 1.0 / max(count, 1)}))]


def _extremum_grad(ctx: GradContext) -> list[Any]:
    attrs = {"axis": ctx.attrs.get("axis"), "keepdims": bool(ctx.attrs.get("keepdims", False))}
    return [ctx.apply("reduce_extremum_grad", [ctx.inputs[0], ctx.outputs[0], ctx.dy], attrs)]


def _extremum_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, y, dy = inputs
    _, shape = _reduced_shape(x.shape, attrs)
    if y.shape != shape or dy.shape != shape:
        raise ShapeError(f"reduce_extremum_grad: y {y.shape} and dy {dy.shape} must be the reduction {shape} of x")
    return [x]


def _extremum_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    x_spec = ctx.inputs[0]
    axes, _ = _reduced_shape(x_spec.shape, ctx.attrs)
    kept = kept_dims_shape(x_spec.shape, axes)
    hit = ctx.scratch(x_spec.shape, dtype=bool)
    share = ctx.scratch(kept, dtype=x_spec.dtype)

    def run(x: Any, y: Any, dy: Any) -> Any:
        xp.equal(x, y.reshape(kept), out=hit)
        xp.sum(hit, axis=axes, keepdims=True, out=share)  # number of tied extrema
        xp.divide(dy.reshape(kept), share, out=share)
        return xp.multiply(hit, share, out=out)

    return run


REDUCE_SUM = OpDef("reduce_sum", _infer("reduce_sum"), kernel=_kernel("sum"), grad=_sum_grad,
                   name_prefix="ReduceSum", doc="sum over axes")
REDUCE_MEAN = OpDef("reduce_mean", _infer("reduce_mean", floating=True), kernel=_kernel("mean"), grad=_mean_grad,
                    name_prefix="ReduceMean", doc="mean over axes")
REDUCE_MAX = OpDef("reduce_max", _infer("reduce_max"), kernel=_kernel("max"), grad=_extremum_grad,
                   name_prefix="ReduceMax", doc="max over axes; gradient split among ties")
REDUCE_MIN = OpDef("reduce_min", _infer("reduce_min"), kernel=_kernel("min"), grad=_extremum_grad,
                   name_prefix="ReduceMin", doc="min over axes; gradient split among ties")
REDUCE_EXTREMUM_GRAD = OpDef("reduce_extremum_grad", _extremum_grad_infer, kernel=_extremum_grad_kernel,
                             not_differentiable=True, name_prefix="ReduceExtremumGrad",
                             doc="dy / (number of ties) at every element equal to the reduced value")

OPS = (REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_EXTREMUM_GRAD)
