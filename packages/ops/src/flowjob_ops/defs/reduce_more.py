"""Legacy v0.4 reductions beyond sum/mean/max/min: reduce_prod, reduce_any, reduce_all, reduce_logsumexp,
and the l2_normalize op (out_0 legacy's y, out_1 its square_x_sum: the per-slice sum of squares).

``axis``/``keepdims`` mean what they mean for ``reduce_sum`` (``defs/reduce.py``). reduce_any and
reduce_all give int8 (1 or 0, any nonzero element counts as true), like the comparisons and the logical
ops. reduce_logsumexp shifts by the maximum before exponentiating, so it never overflows (legacy
composed log(reduce_sum(exp(x))), which is inf for x > ~88 in float32).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import kept_dims_shape, normalize_axis, require_floating
from flowjob_ops.defs.reduce import _reduced_shape, _spread

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


# reduce_prod ---------------------------------------------------------------------------------
def _prod_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axes, _, keepdims = _geometry(ctx)
    return lambda x: xp.prod(x, axis=axes, keepdims=keepdims, out=out)


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


# reduce_any / reduce_all ----------------------------------------------------------------------
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


# reduce_logsumexp ------------------------------------------------------------------------------
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
                    name_prefix="ReduceProd", doc="product over axes")
REDUCE_PROD_GRAD = OpDef("reduce_prod_grad", _prod_grad_infer, kernel=_prod_grad_kernel, not_differentiable=True,
                         name_prefix="ReduceProdGrad", doc="dy times the product of the slice's other elements")
REDUCE_ANY = OpDef("reduce_any", _reduce_infer("reduce_any", "fiub", LOGICAL_DTYPE), kernel=_logical_kernel("any"),
                   not_differentiable=True, name_prefix="ReduceAny",
                   doc="1 (int8) where some element over axes is nonzero, else 0")
REDUCE_ALL = OpDef("reduce_all", _reduce_infer("reduce_all", "fiub", LOGICAL_DTYPE), kernel=_logical_kernel("all"),
                   not_differentiable=True, name_prefix="ReduceAll",
                   doc="1 (int8) where every element over axes is nonzero, else 0")
REDUCE_LOGSUMEXP = OpDef("reduce_logsumexp", _reduce_infer("reduce_logsumexp", "f"), kernel=_logsumexp_kernel,
                         grad=_logsumexp_grad, name_prefix="ReduceLogSumExp",
                         doc="log(sum(exp(x))) over axes, shifted by the maximum")


# l2_normalize ----------------------------------------------------------------------------------
def _l2_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating([x], "l2_normalize (input)")
    if not x.shape:
        raise ShapeError("l2_normalize needs an input of rank >= 1")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    if not float(attrs["epsilon"]) >= 0:
        raise ShapeError(f"l2_normalize: epsilon must be >= 0, got {attrs['epsilon']!r}")
    return [x, BlobSpec(kept_dims_shape(x.shape, (axis,)), x.dtype)]


def _l2_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    y, square_sum = ctx.out(0), ctx.out(1)
    spec = ctx.inputs[0]
    axis = normalize_axis(ctx.attrs["axis"], len(spec.shape))
    eps = spec.dtype.type(ctx.attrs["epsilon"])
    norm = ctx.scratch(square_sum.shape, spec.dtype)

    def run(x: Any) -> tuple[Any, Any]:  # x / sqrt(max(sum(x^2), epsilon)), as legacy's kernel
        xp.square(x, out=y)
        xp.sum(y, axis=axis, keepdims=True, out=square_sum)
        xp.maximum(square_sum, eps, out=norm)
        xp.sqrt(norm, out=norm)
        xp.divide(x, norm, out=y)
        return y, square_sum

    return run


def _l2_grad(ctx: GradContext) -> list[Any]:
    x = ctx.inputs[0]
    y, square_sum = ctx.outputs
    dy, dsum = ctx.out_grads
    parts = []
    if dy is not None:
        parts.append(ctx.apply("l2_normalize_grad", [dy, y, square_sum], dict(ctx.attrs)))
    if dsum is not None:  # d sum(x^2) = 2 x
        spread = ctx.apply("broadcast_to", [dsum], {"shape": x.shape}) if dsum.shape != x.shape else dsum
        parts.append(ctx.apply("scalar_mul", [ctx.apply("multiply", [x, spread])], {"scalar": 2.0}))
    if not parts:
        return [None]
    return [parts[0] if len(parts) == 1 else ctx.apply("add", parts)]


def _l2_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, y, square_sum = inputs
    axis = normalize_axis(attrs["axis"], len(y.shape))
    if dy.shape != y.shape or square_sum.shape != kept_dims_shape(y.shape, (axis,)):
        raise ShapeError(f"l2_normalize_grad: dy {dy.shape}, y {y.shape}, square_x_sum {square_sum.shape}")
    return [y]


def _l2_grad_kernel(ctx: KernelContext) -> Any:
    xp, dx = ctx.xp, ctx.out(0)
    spec = ctx.inputs[1]
    axis = normalize_axis(ctx.attrs["axis"], len(spec.shape))
    eps = spec.dtype.type(ctx.attrs["epsilon"])
    kept = kept_dims_shape(spec.shape, (axis,))
    norm = ctx.scratch(kept, spec.dtype)
    dot = ctx.scratch(kept, spec.dtype)
    clamped = ctx.scratch(kept, dtype=bool)

    def run(dy: Any, y: Any, square_sum: Any) -> Any:
        # above epsilon the norm depends on x: (dy - y * sum(y dy)) / norm; below it the norm is the
        # constant sqrt(epsilon) and dx = dy / norm
        xp.maximum(square_sum, eps, out=norm)
        xp.sqrt(norm, out=norm)
        xp.multiply(y, dy, out=dx)
        xp.sum(dx, axis=axis, keepdims=True, out=dot)
        xp.less(square_sum, eps, out=clamped)
        dot[clamped] = 0
        xp.multiply(y, dot, out=dx)
        xp.subtract(dy, dx, out=dx)
        return xp.divide(dx, norm, out=dx)

    return run


L2_NORMALIZE = OpDef("l2_normalize", _l2_infer, kernel=_l2_kernel, grad=_l2_grad, name_prefix="L2Normalize",
                     doc="y = x / sqrt(max(sum(x^2 over axis), epsilon)); square_x_sum keeps the axis as 1")
L2_NORMALIZE_GRAD = OpDef("l2_normalize_grad", _l2_grad_infer, kernel=_l2_grad_kernel, not_differentiable=True,
                          name_prefix="L2NormalizeGrad", doc="inputs (dy, y, square_x_sum): the gradient of x")

OPS = (REDUCE_PROD, REDUCE_PROD_GRAD, REDUCE_ANY, REDUCE_ALL, REDUCE_LOGSUMEXP, L2_NORMALIZE, L2_NORMALIZE_GRAD)
