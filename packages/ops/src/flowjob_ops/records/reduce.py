"""Reductions: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod, reduce_any, reduce_all,
reduce_logsumexp, and the counts of non-finite elements (count_not_finite, multi_count_not_finite).

``axis`` is None (all axes), an int or a list of ints; ``keepdims`` keeps reduced axes as 1.
The gradient of reduce_max/reduce_min is split evenly among tied extrema (as TensorFlow
and legacy OneFlow did), so it is well defined at ties. reduce_any and reduce_all give int8
(1 or 0, any nonzero element counts as true), like the comparisons and the logical ops.
reduce_logsumexp shifts by the maximum before exponentiating, so it never overflows (legacy
composed log(reduce_sum(exp(x))), which is inf for x > ~88 in float32).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import kept_dims_shape, normalize_axes
from flowjob_ops import layout_rules


def _reduced_shape(shape: Sequence[int], attrs: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(axes, output shape) of a reduction of ``shape``.

    A reduction that removes every axis gives shape (1,), as legacy's did (its blobs were never 0-d:
    programs ``flow.concat`` full reductions and index them with ``[0]``)."""
    axes = normalize_axes(attrs.get("axis"), len(shape))
    if attrs.get("keepdims", False):
        return axes, kept_dims_shape(shape, axes)
    return axes, tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)


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
        kept = out.reshape(kept_dims_shape(ctx.inputs[0].shape, axes))  # a view: also right for the (1,) of all axes
        if ctx.backend.host_arrays or name not in ("min", "max"):
            return lambda x: (reduce(x, axis=axes, keepdims=True, out=kept), out)[1]

        def into_out(x: Any) -> Any:
            # CuPy 14's min (not its max) raises TypeError when given out= (bench/cupy_facts.py read it off
            # an H100): reduce into a fresh array, then copy
            xp.copyto(kept, reduce(x, axis=axes, keepdims=True))
            return out

        return into_out

    return build


def _spread(ctx: GradContext, dy: Any) -> Any:
    """``dy`` (the reduction's shape) broadcast back to the input's shape: to the traced shape, or, where
    the data decide the input's rows (argwhere), to its shape at each step (legacy's broadcast_like)."""
    x = ctx.inputs[0]
    axes, _ = _reduced_shape(x.shape, ctx.attrs)
    kept = kept_dims_shape(x.shape, axes)
    if dy.shape != kept:
        dy = ctx.apply("reshape", [dy], {"shape": kept})
    if kept == x.shape:
        return dy
    if ctx.rows_from_data(x):
        return ctx.apply("broadcast_to_compatible_with", [dy, x])
    return ctx.apply("broadcast_to", [dy], {"shape": x.shape})


def _sum_grad(ctx: GradContext) -> list[Any]:
    return [_spread(ctx, ctx.dy)]


def _mean_grad(ctx: GradContext) -> list[Any]:
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.rows_from_data(x):  # the count is the step's, as legacy's reduce_mean of a dynamic blob counted it
        axes, _ = _reduced_shape(x.shape, ctx.attrs)
        count = ctx.apply("shape_elem_cnt", [x], {"axis": axes, "dtype": x.dtype})
        return [ctx.apply("divide", [_spread(ctx, ctx.dy), count])]
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
                   doc="the sum of the elements along axis",
                   compute=Compute(layouts=layout_rules.reduce_sum, amp="black"))
REDUCE_MEAN = OpDef("reduce_mean", _infer("reduce_mean", floating=True), kernel=_kernel("mean"), grad=_mean_grad,
                    doc="the mean of the elements along axis",
                    compute=Compute(layouts=layout_rules.reduce_mean, amp="black"))
REDUCE_MAX = OpDef("reduce_max", _infer("reduce_max"), kernel=_kernel("max"), grad=_extremum_grad,
                   doc="the maximum of the elements along axis (gradient split evenly among ties)",
                   compute=Compute(amp="black"))
REDUCE_MIN = OpDef("reduce_min", _infer("reduce_min"), kernel=_kernel("min"), grad=_extremum_grad,
                   doc="the minimum of the elements along axis (gradient split evenly among ties)",
                   compute=Compute(amp="black"))
REDUCE_EXTREMUM_GRAD = OpDef("reduce_extremum_grad", _extremum_grad_infer, kernel=_extremum_grad_kernel,
                             not_differentiable=True,
                             doc="dy / (number of ties) at every element equal to the reduced value")


# reduce_prod, reduce_any, reduce_all, reduce_logsumexp -----------------------------------------------
LOGICAL_DTYPE = np.dtype(np.int8)


def _reduce_infer(op: str, kinds: str, dtype: np.dtype | None = None) -> Any:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        if x.dtype.kind not in kinds:
            what = "floating" if kinds == "f" else "numeric"
            raise ShapeError(f"{op} needs a {what} input_tensor, got {x.dtype}")
        axes, shape = _reduced_shape(x.shape, attrs)
        if op == "reduce_logsumexp" and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{op} over an empty axis of shape {x.shape}")
        return [BlobSpec(shape, dtype or x.dtype)]

    return infer


def _geometry(ctx: KernelContext) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    axes, _ = _reduced_shape(ctx.inputs[0].shape, ctx.attrs)
    return axes, kept_dims_shape(ctx.inputs[0].shape, axes), bool(ctx.attrs.get("keepdims", False))


def _prod_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axes, kept_shape, _ = _geometry(ctx)
    kept = out.reshape(kept_shape)  # a view: also right for the (1,) of all axes
    return lambda x: (xp.prod(x, axis=axes, keepdims=True, out=kept), out)[1]


def _prod_grad(ctx: GradContext) -> list[Any]:
    attrs = {"axis": ctx.attrs.get("axis"), "keepdims": bool(ctx.attrs.get("keepdims", False))}
    return [ctx.apply("reduce_prod_grad", [ctx.inputs[0], ctx.dy], attrs)]


def _prod_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, dy = inputs
    _, shape = _reduced_shape(x.shape, attrs)
    if dy.shape != shape or dy.dtype != x.dtype:
        raise ShapeError(f"reduce_prod_grad: dy {dy.shape}:{dy.dtype} must be the reduction {shape}:{x.dtype} of x")
    return [x]


def _prod_grad_kernel(ctx: KernelContext) -> Any:
    """dy times the product of the other elements of each slice, exact where x has zeros: dividing the
    product by x would give 0/0 there. With no zero in a slice it is prod / x; with one zero, the product
    of the nonzero elements at the zero and 0 elsewhere; with two or more, 0 everywhere."""
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.inputs[0]
    axes, kept, _ = _geometry(ctx)
    zero = ctx.scratch(spec.shape, dtype=bool)
    safe = ctx.scratch(spec.shape, spec.dtype)
    zeros = ctx.scratch(kept, spec.dtype)
    prod = ctx.scratch(kept, spec.dtype)
    flag = ctx.scratch(kept, dtype=bool)
    one = spec.dtype.type(1)

    def run(x: Any, dy: Any) -> Any:
        xp.equal(x, 0, out=zero)
        xp.sum(zero, axis=axes, keepdims=True, out=zeros)
        xp.copyto(safe, x)
        safe[zero] = one
        xp.prod(safe, axis=axes, keepdims=True, out=prod)  # product of the nonzero elements
        xp.multiply(prod, dy.reshape(kept), out=prod)
        xp.divide(prod, safe, out=out)  # right where the slice has no zero
        xp.equal(zeros, 0, out=flag)
        xp.multiply(out, flag, out=out)  # a slice with a zero: 0 at every nonzero element
        xp.equal(zeros, 1, out=flag)
        xp.logical_and(zero, flag, out=zero)  # the only zero of its slice gets the others' product
        xp.multiply(zero, prod, out=safe)
        return xp.add(out, safe, out=out)

    return run


def _logical_kernel(name: str) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        axes, _, keepdims = _geometry(ctx)
        reduce = getattr(xp, name)
        truth = ctx.scratch(ctx.inputs[0].shape, dtype=bool)

        def run(x: Any) -> Any:
            xp.not_equal(x, 0, out=truth)
            out[...] = reduce(truth, axis=axes, keepdims=keepdims)
            return out

        return run

    return build


def _logsumexp_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.inputs[0]
    axes, kept, _ = _geometry(ctx)
    peak = ctx.scratch(kept, spec.dtype)
    shifted = ctx.scratch(spec.shape, spec.dtype)
    total = ctx.scratch(kept, spec.dtype)

    def run(x: Any) -> Any:  # m + log(sum(exp(x - m))), m the slice's maximum (0 where it is not finite)
        xp.max(x, axis=axes, keepdims=True, out=peak)
        peak[~xp.isfinite(peak)] = 0  # all -inf: log(0) = -inf; +inf or nan propagate through the sum
        xp.subtract(x, peak, out=shifted)
        xp.exp(shifted, out=shifted)
        xp.sum(shifted, axis=axes, keepdims=True, out=total)
        xp.log(total, out=total)
        xp.add(total, peak, out=total)
        out[...] = total.reshape(out.shape)
        return out

    return run


def _logsumexp_grad(ctx: GradContext) -> list[Any]:
    """dy * softmax over the reduced axes: dy * exp(x - y), both spread back to x's shape."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    weight = ctx.apply("exp", [ctx.apply("subtract", [x, _spread(ctx, y)])])
    return [ctx.apply("multiply", [weight, _spread(ctx, ctx.dy)])]


REDUCE_PROD = OpDef("reduce_prod", _reduce_infer("reduce_prod", "fiu"), kernel=_prod_kernel, grad=_prod_grad,
                    doc="the product of the elements along axis (gradient exact where elements are zero)",
                    compute=Compute(amp="black"))


REDUCE_PROD_GRAD = OpDef("reduce_prod_grad", _prod_grad_infer, kernel=_prod_grad_kernel, not_differentiable=True,
                         doc="dy times the product of the slice's other elements")


REDUCE_ANY = OpDef("reduce_any", _reduce_infer("reduce_any", "fiub", LOGICAL_DTYPE), kernel=_logical_kernel("any"),
                   not_differentiable=True,
                   doc="the logical or of the elements along axis, as int8 (1 where some element is nonzero)",
                   compute=Compute(amp="black"))


REDUCE_ALL = OpDef("reduce_all", _reduce_infer("reduce_all", "fiub", LOGICAL_DTYPE), kernel=_logical_kernel("all"),
                   not_differentiable=True,
                   doc="the logical and of the elements along axis, as int8 (1 where every element is nonzero)",
                   compute=Compute(amp="black"))


REDUCE_LOGSUMEXP = OpDef("reduce_logsumexp", _reduce_infer("reduce_logsumexp", "f"), kernel=_logsumexp_kernel,
                         grad=_logsumexp_grad,
                         doc="log(sum(exp(x))) of the elements along axis, shifted by the maximum (no overflow)",
                         compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="ReduceLogSumExp"))


# count_not_finite, multi_count_not_finite ------------------------------------------------------------
COUNT_DTYPE = np.dtype(np.int64)  # legacy's count blobs were int64 (1,)


def _count_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs:
        raise ShapeError("multi_count_not_finite needs at least one blob")
    first = inputs[0].dtype
    for i, spec in enumerate(inputs):
        if spec.dtype.kind != "f":
            raise ShapeError(f"count_not_finite needs floating blobs, input {i} is {spec.dtype}")
        if spec.dtype != first:
            raise ShapeError(f"multi_count_not_finite needs blobs of one dtype, got {first} and {spec.dtype}")
    return [BlobSpec((1,), COUNT_DTYPE)]


def _count_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(*blobs: Any) -> Any:
        total = sum(int(xp.count_nonzero(~xp.isfinite(b))) for b in blobs)
        out[...] = total
        return out

    return run


COUNT_NOT_FINITE = OpDef("count_not_finite", _count_infer, kernel=_count_kernel, not_differentiable=True,
                         doc="int64 (1,): how many elements are inf or nan", compute=Compute(amp="black"))


MULTI_COUNT_NOT_FINITE = OpDef("multi_count_not_finite", _count_infer, kernel=_count_kernel, not_differentiable=True,
                               doc="int64 (1,): how many elements of all the inputs are inf or nan",
                               compute=Compute(amp="black"))

OPS = (REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_EXTREMUM_GRAD, REDUCE_PROD, REDUCE_PROD_GRAD,
       REDUCE_ANY, REDUCE_ALL, REDUCE_LOGSUMEXP, COUNT_NOT_FINITE, MULTI_COUNT_NOT_FINITE)
