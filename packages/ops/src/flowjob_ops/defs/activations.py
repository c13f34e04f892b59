"""Activations: relu, sigmoid, tanh, gelu, and their fused gradient ops."""
from __future__ import annotations

from typing import Any

from flowjob_core import Elementwise, GradContext, KernelContext, OpDef

from flowjob_ops.defs.common import grad_like_second, unary_float
from flowjob_ops.defs.special import NormalCdf


# relu ---------------------------------------------------------------------
def _relu_grad(ctx: GradContext) -> list[Any]:
    # from the output: y > 0 exactly where x > 0, and y is often kept alive anyway
    return [ctx.apply("relu_grad", [ctx.outputs[0], ctx.dy])]


def _relu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    mask = ctx.workspace(ctx.outputs[0].shape, dtype=bool)  # a per-step bool temporary would be mmap'd for conv maps

    def run(y: Any, dy: Any) -> Any:
        xp.greater(y, 0, out=mask)
        return xp.multiply(dy, mask, out=out)

    return run


RELU = OpDef("relu", unary_float, grad=_relu_grad, name_prefix="Relu", elementwise=Elementwise("maximum", fixed=0),
             doc="max(x, 0)")
RELU_GRAD = OpDef("relu_grad", grad_like_second, kernel=_relu_grad_kernel, not_differentiable=True,
                  name_prefix="ReluGrad", doc="dy where y > 0, else 0")


# sigmoid ------------------------------------------------------------------
def _sigmoid_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    half = ctx.outputs[0].dtype.type(0.5)

    def run(x: Any) -> Any:
        # 1/2 + tanh(x/2)/2: the same function as 1/(1+exp(-x)), without exp overflow for x << 0
        xp.multiply(x, half, out=out)
        xp.tanh(out, out=out)
        xp.multiply(out, half, out=out)
        return xp.add(out, half, out=out)

    return run


def _sigmoid_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("sigmoid_grad", [ctx.outputs[0], ctx.dy])]


def _sigmoid_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    one = ctx.outputs[0].dtype.type(1)

    def run(y: Any, dy: Any) -> Any:  # dy * y * (1 - y)
        xp.subtract(one, y, out=out)
        xp.multiply(out, y, out=out)
        return xp.multiply(out, dy, out=out)

    return run


SIGMOID = OpDef("sigmoid", unary_float, kernel=_sigmoid_kernel, grad=_sigmoid_grad, name_prefix="Sigmoid",
                doc="1 / (1 + exp(-x))")
SIGMOID_GRAD = OpDef("sigmoid_grad", grad_like_second, kernel=_sigmoid_grad_kernel, not_differentiable=True,
                     name_prefix="SigmoidGrad", doc="dy * y * (1 - y) from the sigmoid output y")


# tanh ---------------------------------------------------------------------
def _tanh_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("tanh_grad", [ctx.outputs[0], ctx.dy])]


def _tanh_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    one = ctx.outputs[0].dtype.type(1)

    def run(y: Any, dy: Any) -> Any:  # dy * (1 - y^2)
        xp.multiply(y, y, out=out)
        xp.subtract(one, out, out=out)
        return xp.multiply(out, dy, out=out)

    return run


TANH = OpDef("tanh", unary_float, grad=_tanh_grad, name_prefix="Tanh", elementwise=Elementwise("tanh"),
             doc="tanh(x)")
TANH_GRAD = OpDef("tanh_grad", grad_like_second, kernel=_tanh_grad_kernel, not_differentiable=True,
                  name_prefix="TanhGrad", doc="dy * (1 - y^2) from the tanh output y")


# gelu ---------------------------------------------------------------------
def _gelu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    cdf = NormalCdf(xp, spec.shape, spec.dtype)

    def run(x: Any) -> Any:  # x * Phi(x), the erf form
        cdf.cdf(x, out)
        return xp.multiply(out, x, out=out)

    return run


def _gelu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("gelu_grad", [ctx.inputs[0], ctx.dy])]


def _gelu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    cdf = NormalCdf(xp, spec.shape, spec.dtype)
    pdf = ctx.workspace(spec.shape, spec.dtype)

    def run(x: Any, dy: Any) -> Any:  # dy * (Phi(x) + x phi(x))
        cdf.pdf(x, pdf)
        xp.multiply(pdf, x, out=pdf)
        cdf.cdf(x, out)
        xp.add(out, pdf, out=out)
        return xp.multiply(out, dy, out=out)

    return run


GELU = OpDef("gelu", unary_float, kernel=_gelu_kernel, grad=_gelu_grad, name_prefix="Gelu",
             doc="x * Phi(x) = x/2 * (1 + erf(x / sqrt(2))), the exact (erf) form")
GELU_GRAD = OpDef("gelu_grad", grad_like_second, kernel=_gelu_grad_kernel, not_differentiable=True,
                  name_prefix="GeluGrad", doc="dy * (Phi(x) + x phi(x))")

OPS = (RELU, RELU_GRAD, SIGMOID, SIGMOID_GRAD, TANH, TANH_GRAD, GELU, GELU_GRAD)
