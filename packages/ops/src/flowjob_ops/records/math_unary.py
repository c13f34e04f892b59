"""Legacy ``flow.math`` unary functions: trigonometric and hyperbolic functions and their inverses,
rounding, erf/erfc/lgamma, rsqrt, softplus, log_sigmoid, log1p/expm1, reciprocal_no_nan.

Legacy facts kept: the ops take floating blobs only; unnamed nodes are ``<op type>_<n>`` (lowercase,
``sin_3``); floor, ceil, rint and round pass a zero gradient (as legacy's kernels did); ``round`` is
C's ``nearbyint``, which rounds halves to even like ``rint``; ``reciprocal_no_nan`` is 0 (and so is
its gradient) where x == 0. lgamma's gradient is digamma (legacy left it unimplemented).

An op that is one ufunc call declares an ``Elementwise`` descriptor, so it fuses; gradients are
graph nodes of existing ops, except lgamma's (a fused ``lgamma_grad`` computing dy * digamma(x)).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, Compute, Elementwise, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import grad_like_second
from flowjob_ops.kernels.special_functions import ErrorFunctions, GammaFunctions

GradRule = Callable[[GradContext], list[Any]]


def _floating(op: str) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        (x,) = inputs
        if x.dtype.kind != "f":
            raise ShapeError(f"flow.math.{op} needs a floating input x, got {x.dtype} (use flow.cast)")
        return [x]

    return infer


# gradient building blocks: each returns a blob ---------------------------------------------------
def _mul(ctx: GradContext, a: Any, b: Any) -> Any:
    return ctx.apply("multiply", [a, b])


def _unary(ctx: GradContext, op: str, x: Any) -> Any:
    return ctx.apply(op, [x])


def _scalar(ctx: GradContext, op: str, x: Any, value: float) -> Any:
    return ctx.apply(op, [x], {"scalar": value})


def _one_minus_x2(ctx: GradContext) -> Any:
    return _scalar(ctx, "scalar_rsub", _unary(ctx, "square", ctx.inputs[0]), 1.0)


def _x2_plus(ctx: GradContext, value: float) -> Any:
    return _scalar(ctx, "scalar_add", _unary(ctx, "square", ctx.inputs[0]), value)


def _grad(rule: Callable[[GradContext], Any]) -> GradRule:
    """A rule giving the whole input gradient as one blob."""
    return lambda ctx: [rule(ctx)]


def _zero_grad(ctx: GradContext) -> list[Any]:
    """Step functions: legacy's kernels return a zero gradient; None is that zero."""
    return [None]


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_slope(ctx: GradContext, sign: float) -> Any:
    """sign * 2/sqrt(pi) * exp(-x^2) * dy."""
    gauss = _unary(ctx, "exp", _unary(ctx, "negative", _unary(ctx, "square", ctx.inputs[0])))
    return _mul(ctx, ctx.dy, _scalar(ctx, "scalar_mul", gauss, sign * _TWO_OVER_SQRT_PI))




# kernels of the ops that are more than one ufunc call --------------------------------------------
def _rsqrt_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        xp.sqrt(x, out=out)
        return xp.reciprocal(out, out=out)

    return run


def _reciprocal_no_nan_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    zero = ctx.scratch(spec.shape, dtype=bool)
    one, nothing = spec.dtype.type(1), spec.dtype.type(0)

    def run(x: Any) -> Any:
        # 1 / x with the zeros replaced by ones, then 0 there: no inf, no numpy warning (and CuPy's
        # ufuncs take no ``where=``; its copyto does)
        xp.equal(x, 0, out=zero)
        xp.copyto(out, x)
        xp.copyto(out, one, where=zero)
        xp.reciprocal(out, out=out)
        xp.copyto(out, nothing, where=zero)
        return out

    return run


def _softplus_kernel(log_sigmoid: bool) -> Callable[[KernelContext], Any]:
    """softplus(x) = max(x, 0) + log1p(exp(-|x|)); log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)):
    the forms without exp overflow for large |x|."""

    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        spec = ctx.outputs[0]
        tail = ctx.scratch(spec.shape, spec.dtype)
        zero = spec.dtype.type(0)

        def run(x: Any) -> Any:
            xp.abs(x, out=tail)
            xp.negative(tail, out=tail)
            xp.exp(tail, out=tail)
            xp.log1p(tail, out=tail)
            if log_sigmoid:
                xp.minimum(x, zero, out=out)
                return xp.subtract(out, tail, out=out)
            xp.maximum(x, zero, out=out)
            return xp.add(out, tail, out=out)

        return run

    return build


def _special_kernel(family: type, method: str) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Any:
        spec = ctx.outputs[0]
        functions = family(ctx.xp, spec.shape, spec.dtype)
        out = ctx.out(0)
        evaluate = getattr(functions, method)
        return lambda x: evaluate(x, out)

    return build


def _lgamma_grad_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    gamma = GammaFunctions(ctx.xp, spec.shape, spec.dtype)
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any, dy: Any) -> Any:
        gamma.digamma(x, out)
        return xp.multiply(out, dy, out=out)

    return run


# the records -------------------------------------------------------------------------------------
def _record(op: str, doc: str, *, ufunc: str | None = None, kernel: Callable[[KernelContext], Any] | None = None,
            grad: Callable[[GradContext], Any] | None = None, step: bool = False) -> OpDef:
    """``grad`` gives the input's whole gradient as one blob; a step function (``step``) passes a zero one."""
    rule = _zero_grad if step else _grad(grad) if grad is not None else None
    elementwise = Elementwise(ufunc) if ufunc is not None else None
    return OpDef(op, _floating(op), kernel=kernel, elementwise=elementwise, grad=rule, doc=doc,
                 compute=Compute(amp="black"), legacy=LegacyFace(name_prefix=op))


OPS = (
    _record("sin", "sin(x)", ufunc="sin", grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "cos", ctx.inputs[0]))),
    _record("cos", "cos(x)", ufunc="cos",
            grad=lambda ctx: _unary(ctx, "negative", _mul(ctx, ctx.dy, _unary(ctx, "sin", ctx.inputs[0])))),
    # tan' = 1 + tan^2, from the output
    _record("tan", "tan(x)", ufunc="tan",
            grad=lambda ctx: _mul(ctx, ctx.dy, _scalar(ctx, "scalar_add", _unary(ctx, "square", ctx.outputs[0]), 1.0))),
    _record("asin", "arcsin(x), for x in [-1, 1]", ufunc="arcsin",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "rsqrt", _one_minus_x2(ctx)))),
    _record("acos", "arccos(x), for x in [-1, 1]", ufunc="arccos",
            grad=lambda ctx: _unary(ctx, "negative", _mul(ctx, ctx.dy, _unary(ctx, "rsqrt", _one_minus_x2(ctx))))),
    _record("atan", "arctan(x)", ufunc="arctan", grad=lambda ctx: ctx.apply("divide", [ctx.dy, _x2_plus(ctx, 1.0)])),
    _record("sinh", "the hyperbolic sine of x", ufunc="sinh",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "cosh", ctx.inputs[0]))),
    _record("cosh", "the hyperbolic cosine of x", ufunc="cosh",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "sinh", ctx.inputs[0]))),
    _record("asinh", "the inverse hyperbolic sine of x", ufunc="arcsinh",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "rsqrt", _x2_plus(ctx, 1.0)))),
    _record("acosh", "the inverse hyperbolic cosine of x, for x >= 1", ufunc="arccosh",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "rsqrt", _x2_plus(ctx, -1.0)))),
    _record("atanh", "the inverse hyperbolic tangent of x, for x in (-1, 1)", ufunc="arctanh",
            grad=lambda ctx: ctx.apply("divide", [ctx.dy, _one_minus_x2(ctx)])),
    _record("log1p", "log(1 + x), accurate for small x", ufunc="log1p",
            grad=lambda ctx: ctx.apply("divide", [ctx.dy, _scalar(ctx, "scalar_add", ctx.inputs[0], 1.0)])),
    _record("expm1", "exp(x) - 1, accurate for small x", ufunc="expm1",
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "exp", ctx.inputs[0]))),
    _record("floor", "the largest integer <= x (gradient zero)", ufunc="floor", step=True),
    _record("ceil", "the smallest integer >= x (gradient zero)", ufunc="ceil", step=True),
    _record("rint", "the nearest integer, halves to even (gradient zero)", ufunc="rint", step=True),
    _record("round", "the nearest integer, halves to even like C's nearbyint (gradient zero)", ufunc="rint",
            step=True),
    # d(x^-1/2)/dx = -y^3 / 2, from the output
    _record("rsqrt", "1 / sqrt(x)", kernel=_rsqrt_kernel,
            grad=lambda ctx: _mul(ctx, ctx.dy, _scalar(ctx, "scalar_mul", _mul(
                ctx, _unary(ctx, "square", ctx.outputs[0]), ctx.outputs[0]), -0.5))),
    # -dy * y^2: y is 0 where x is 0, so the gradient is 0 there, as legacy's
    _record("reciprocal_no_nan", "1 / x, and 0 where x == 0 (the gradient too)", kernel=_reciprocal_no_nan_kernel,
            grad=lambda ctx: _unary(ctx, "negative", _mul(ctx, ctx.dy, _unary(ctx, "square", ctx.outputs[0])))),
    _record("softplus", "log(1 + exp(x)), without overflow for large x",
            kernel=_softplus_kernel(log_sigmoid=False),
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "sigmoid", ctx.inputs[0]))),
    _record("log_sigmoid", "log(1 / (1 + exp(-x))), without overflow for large -x",
            kernel=_softplus_kernel(log_sigmoid=True),
            grad=lambda ctx: _mul(ctx, ctx.dy, _unary(ctx, "sigmoid", _unary(ctx, "negative", ctx.inputs[0])))),
    _record("erf", "the error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt",
            kernel=_special_kernel(ErrorFunctions, "erf"),
            grad=lambda ctx: _erf_slope(ctx, 1.0)),
    _record("erfc", "1 - erf(x), accurate where erf(x) is close to 1", kernel=_special_kernel(ErrorFunctions, "erfc"),
            grad=lambda ctx: _erf_slope(ctx, -1.0)),
    _record("lgamma", "log |Gamma(x)| (gradient digamma(x))", kernel=_special_kernel(GammaFunctions, "lgamma"),
            grad=lambda ctx: ctx.apply("lgamma_grad", [ctx.inputs[0], ctx.dy])),
    OpDef("lgamma_grad", grad_like_second, kernel=_lgamma_grad_kernel, not_differentiable=True,
          doc="inputs (x, dy): dy * digamma(x)", legacy=LegacyFace(name_prefix="lgamma_grad")),
)
