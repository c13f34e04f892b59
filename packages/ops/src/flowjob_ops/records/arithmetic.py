"""Arithmetic: + - * / with broadcasting, maximum and minimum, their forms with a Python scalar, the basic
unary functions (negative, square, sqrt, exp, log, abs, reciprocal, sign), clip_by_value, and integer division.

Gradients of broadcasting ops are returned in the broadcast shape; autodiff sums them back
to each input's shape (``unbroadcast``), so the rules here stay one line each.

Integer division is legacy's integer broadcast_div kernels': C's ``a / b``. The quotient is truncated
toward zero (-7 / 2 is -3, where numpy's ``//`` gives -4). A zero divisor has no defined result in C
(legacy's CPU kernel died of SIGFPE, its GPU kernel returned garbage), so here the step fails with an
error naming the job and the op, and the session stays usable. The one overflowing case, the type's
minimum divided by -1, wraps around to the minimum as two's complement arithmetic does. Integer
results carry no gradient.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Elementwise, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import (
    broadcast_shape, check_scalar, require_floating, same_dtype, typed_scalar, unary_float, unary_numeric)


# binary, broadcasting -----------------------------------------------------
def _binary_infer(op: str, floating: bool = False) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        dtype = same_dtype(inputs, op)
        if floating:
            require_floating(inputs, op)
        elif dtype.kind not in "fiu":
            raise ShapeError(f"{op} needs numeric inputs, got {dtype}")
        return [BlobSpec(broadcast_shape(inputs[0].shape, inputs[1].shape, f"{op} operands"), dtype)]

    return infer


def _add_grad(ctx: GradContext) -> list[Any]:
    return [ctx.dy, ctx.dy]


def _subtract_grad(ctx: GradContext) -> list[Any]:
    return [ctx.dy, ctx.apply("negative", [ctx.dy]) if ctx.needs[1] else None]


def _multiply_grad(ctx: GradContext) -> list[Any]:
    a, b = ctx.inputs
    return [ctx.apply("multiply", [ctx.dy, b]) if ctx.needs[0] else None,
            ctx.apply("multiply", [ctx.dy, a]) if ctx.needs[1] else None]


def _divide_grad(ctx: GradContext) -> list[Any]:
    b, y = ctx.inputs[1], ctx.outputs[0]
    db = None
    if ctx.needs[1]:  # d(a/b)/db = -y/b
        db = ctx.apply("negative", [ctx.apply("divide", [ctx.apply("multiply", [ctx.dy, y]), b])])
    return [ctx.apply("divide", [ctx.dy, b]) if ctx.needs[0] else None, db]


def _extremum_grad(op: str) -> Callable[[GradContext], list[Any]]:
    def grad(ctx: GradContext) -> list[Any]:
        return list(ctx.apply(op, [ctx.inputs[0], ctx.inputs[1], ctx.dy]))

    return grad


def _extremum_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[2], inputs[2]]


def _extremum_grad_kernel(compare: str) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Any:
        xp = ctx.xp
        da, db = ctx.out(0), ctx.out(1)
        test = getattr(xp, compare)
        mask = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

        def run(a: Any, b: Any, dy: Any) -> Any:
            test(a, b, out=mask)  # ties go to the first operand
            xp.multiply(dy, mask, out=da)
            xp.subtract(dy, da, out=db)
            return da, db

        return run

    return build


ADD = OpDef("add", _binary_infer("add"), grad=_add_grad, elementwise=Elementwise("add", arity=2),
            doc="a + b with numpy broadcasting", compute=Compute(amp="gray"))
SUBTRACT = OpDef("subtract", _binary_infer("subtract"), grad=_subtract_grad,
                 elementwise=Elementwise("subtract", arity=2), doc="a - b with numpy broadcasting",
                 compute=Compute(amp="gray"))
MULTIPLY = OpDef("multiply", _binary_infer("multiply"), grad=_multiply_grad,
                 elementwise=Elementwise("multiply", arity=2), doc="a * b with numpy broadcasting",
                 compute=Compute(amp="gray"))
DIVIDE = OpDef("divide", _binary_infer("divide", floating=True), grad=_divide_grad,
               elementwise=Elementwise("divide", arity=2), doc="a / b with numpy broadcasting (floating)",
               compute=Compute(amp="gray"))
MAXIMUM = OpDef("maximum", _binary_infer("maximum"), grad=_extremum_grad("maximum_grad"),
                elementwise=Elementwise("maximum", arity=2), doc="elementwise max; where a == b the gradient goes to a",
                compute=Compute(amp="black"))
MINIMUM = OpDef("minimum", _binary_infer("minimum"), grad=_extremum_grad("minimum_grad"),
                elementwise=Elementwise("minimum", arity=2), doc="elementwise min; where a == b the gradient goes to a",
                compute=Compute(amp="black"))
MAXIMUM_GRAD = OpDef("maximum_grad", _extremum_grad_infer, kernel=_extremum_grad_kernel("greater_equal"),
                     not_differentiable=True, doc="(dy where a >= b, dy where a < b), in the broadcast shape")
MINIMUM_GRAD = OpDef("minimum_grad", _extremum_grad_infer, kernel=_extremum_grad_kernel("less_equal"),
                     not_differentiable=True, doc="(dy where a <= b, dy where a > b), in the broadcast shape")


# with a Python scalar -------------------------------------------------------
def _scalar_infer(op: str, floating: bool = False) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        if floating:
            require_floating(inputs, op)
        elif x.dtype.kind not in "fiu":
            raise ShapeError(f"{op} needs a numeric input, got {x.dtype}")
        check_scalar(attrs.get("scalar"), x.dtype, op)
        return [x]

    return infer


def _with_scalar(ufunc: str, scalar_first: bool = False) -> Elementwise:
    return Elementwise(ufunc, scalar="scalar", scalar_first=scalar_first)


def _scalar_add_grad(ctx: GradContext) -> list[Any]:
    return [ctx.dy]


def _scalar_rsub_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("negative", [ctx.dy])]


def _scalar_div_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("scalar_div", [ctx.dy], {"scalar": ctx.attrs["scalar"]})]


def _scalar_rdiv_grad(ctx: GradContext) -> list[Any]:
    # d(s/x)/dx = -s/x^2 = -y/x
    x, y = ctx.inputs[0], ctx.outputs[0]
    return [ctx.apply("negative", [ctx.apply("divide", [ctx.apply("multiply", [ctx.dy, y]), x])])]


def _scalar_pow_grad(ctx: GradContext) -> list[Any]:
    p = ctx.attrs["scalar"]  # d(x^p)/dx = p x^(p-1)
    if p == 0:
        return [None]
    if p == 1:
        return [ctx.dy]
    slope = ctx.apply("scalar_mul", [ctx.apply("scalar_pow", [ctx.inputs[0]], {"scalar": p - 1})], {"scalar": p})
    return [ctx.apply("multiply", [ctx.dy, slope])]


SCALAR_ADD = OpDef("scalar_add", _scalar_infer("scalar_add"), grad=_scalar_add_grad, elementwise=_with_scalar("add"),
                   doc="x + scalar", compute=Compute(amp="gray"))
SCALAR_RSUB = OpDef("scalar_rsub", _scalar_infer("scalar_rsub"), grad=_scalar_rsub_grad,
                    elementwise=_with_scalar("subtract", scalar_first=True), doc="scalar - x",
                    compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="ScalarSub"))
SCALAR_DIV = OpDef("scalar_div", _scalar_infer("scalar_div", floating=True), grad=_scalar_div_grad,
                   elementwise=_with_scalar("divide"), doc="x / scalar", compute=Compute(amp="black"))
SCALAR_RDIV = OpDef("scalar_rdiv", _scalar_infer("scalar_rdiv", floating=True), grad=_scalar_rdiv_grad,
                    elementwise=_with_scalar("divide", scalar_first=True), doc="scalar / x",
                    compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="ScalarDiv"))
SCALAR_POW = OpDef("scalar_pow", _scalar_infer("scalar_pow", floating=True), grad=_scalar_pow_grad,
                   elementwise=_with_scalar("power"), doc="x ** scalar", compute=Compute(amp="black"))


# unary ----------------------------------------------------------------------
def _negative_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("negative", [ctx.dy])]


def _square_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("multiply", [ctx.dy, ctx.apply("scalar_mul", [ctx.inputs[0]], {"scalar": 2.0})])]


def _sqrt_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("divide", [ctx.apply("scalar_mul", [ctx.dy], {"scalar": 0.5}), ctx.outputs[0]])]


def _exp_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("multiply", [ctx.dy, ctx.outputs[0]])]


def _log_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("divide", [ctx.dy, ctx.inputs[0]])]


def _abs_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("multiply", [ctx.dy, ctx.apply("sign", [ctx.inputs[0]])])]


def _reciprocal_grad(ctx: GradContext) -> list[Any]:
    y = ctx.outputs[0]  # d(1/x)/dx = -y^2
    return [ctx.apply("negative", [ctx.apply("multiply", [ctx.dy, ctx.apply("square", [y])])])]


def _zero_grad(ctx: GradContext) -> list[Any]:
    """Piecewise-constant functions: no gradient flows (zero almost everywhere)."""
    return [None] * len(ctx.inputs)


NEGATIVE = OpDef("negative", unary_numeric, elementwise=Elementwise("negative"), grad=_negative_grad, doc="-x",
                 compute=Compute(amp="black"))
SQUARE = OpDef("square", unary_numeric, elementwise=Elementwise("square"), grad=_square_grad, doc="x * x",
               compute=Compute(amp="black"))
SQRT = OpDef("sqrt", unary_float, elementwise=Elementwise("sqrt"), grad=_sqrt_grad, doc="the square root of x",
             compute=Compute(amp="gray"))
EXP = OpDef("exp", unary_float, elementwise=Elementwise("exp"), grad=_exp_grad, doc="e ** x",
            compute=Compute(amp="black"))
LOG = OpDef("log", unary_float, elementwise=Elementwise("log"), grad=_log_grad, doc="the natural logarithm of x",
            compute=Compute(amp="black"))
ABS = OpDef("abs", unary_numeric, elementwise=Elementwise("abs"), grad=_abs_grad,
            doc="|x|, with gradient sign(x) (0 at 0)", compute=Compute(amp="black"))
RECIPROCAL = OpDef("reciprocal", unary_float, elementwise=Elementwise("reciprocal"), grad=_reciprocal_grad, doc="1 / x",
                   compute=Compute(amp="black"))
SIGN = OpDef("sign", unary_numeric, elementwise=Elementwise("sign"), grad=_zero_grad,
             doc="-1, 0 or 1 by the sign of x (its gradient is zero)", compute=Compute(amp="black"))


# clip -----------------------------------------------------------------------
def _bounds(attrs: dict) -> tuple[Any, Any]:
    return attrs.get("min_value"), attrs.get("max_value")


def _clip_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs[:1]
    if x.dtype.kind not in "fiu":
        raise ShapeError(f"clip_by_value needs a numeric input, got {x.dtype}")
    lo, hi = _bounds(attrs)
    for bound in (lo, hi):
        if bound is not None:
            check_scalar(bound, x.dtype, "clip_by_value")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"clip_by_value: min_value {lo} is above max_value {hi}")
    return [inputs[-1]]


def _clip_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dtype = ctx.outputs[0].dtype
    lo, hi = (None if b is None else typed_scalar(b, dtype) for b in _bounds(ctx.attrs))
    if lo is None and hi is None:
        return lambda x: xp.copyto(out, x) or out
    return lambda x: xp.clip(x, lo, hi, out=out)


def _clip_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("clip_grad", [ctx.inputs[0], ctx.dy], dict(ctx.attrs))]


def _clip_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dtype = ctx.inputs[0].dtype
    lo, hi = (None if b is None else typed_scalar(b, dtype) for b in _bounds(ctx.attrs))
    inside = ctx.scratch(ctx.outputs[0].shape, dtype=bool)
    below = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any, dy: Any) -> Any:  # dy where min_value <= x <= max_value
        inside.fill(True)
        if lo is not None:
            xp.greater_equal(x, lo, out=inside)
        if hi is not None:
            xp.less_equal(x, hi, out=below)
            xp.logical_and(inside, below, out=inside)
        return xp.multiply(dy, inside, out=out)

    return run


CLIP = OpDef("clip_by_value", _clip_infer, kernel=_clip_kernel, grad=_clip_grad,
             doc="x limited to [min_value, max_value] (either may be None)", compute=Compute(amp="black"))
CLIP_GRAD = OpDef("clip_grad", _clip_infer, kernel=_clip_grad_kernel, not_differentiable=True,
                  doc="inputs (x, dy): dy where x lies within the bounds, else 0")


# integer division ------------------------------------------------------------------------------------
def _int_divide_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dtype = same_dtype(inputs, "int_divide")
    if dtype.kind not in "iu":
        raise ShapeError(f"int_divide needs integer inputs, got {dtype} (floating blobs use divide)")
    return [BlobSpec(broadcast_shape(inputs[0].shape, inputs[1].shape, "int_divide operands"), dtype)]


def _int_divide_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    remainder = ctx.scratch(ctx.outputs[0].shape, dtype=ctx.outputs[0].dtype)

    def run(a: Any, b: Any) -> Any:
        if not bool(xp.all(b)):
            raise ZeroDivisionError("integer division by zero: the divisor holds a 0 (legacy's integer kernel "
                                    "had no defined result for it)")
        # fmod keeps the dividend's sign (C's %), so a - fmod(a, b) is an exact multiple of b and
        # floor division of it is the truncated quotient
        xp.fmod(a, b, out=remainder)
        xp.subtract(a, remainder, out=out)
        with np.errstate(over="ignore"):  # min // -1 wraps, as in C on two's complement machines
            return xp.floor_divide(out, b, out=out)

    return run


INT_DIVIDE = OpDef("int_divide", _int_divide_infer, kernel=_int_divide_kernel, not_differentiable=True,
                   doc="a / b on integer blobs with broadcasting, truncated toward zero (C's integer division)",
                   legacy=LegacyFace(name_prefix="Divide"))

OPS = (ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM, MAXIMUM_GRAD, MINIMUM_GRAD, SCALAR_ADD, SCALAR_RSUB,
       SCALAR_DIV, SCALAR_RDIV, SCALAR_POW, NEGATIVE, SQUARE, SQRT, EXP, LOG, ABS, RECIPROCAL, SIGN, CLIP,
       CLIP_GRAD, INT_DIVIDE)
