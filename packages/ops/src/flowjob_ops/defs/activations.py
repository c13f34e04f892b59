"""Activations: relu."""
from __future__ import annotations

from typing import Any

from flowjob_core import GradContext, KernelContext, OpDef

from flowjob_ops.defs.common import same_as_first, unary_float


def _relu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.maximum(x, 0, out=out)


def _relu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("relu_grad", [ctx.outputs[0], ctx.dy])]


def _relu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    zero = xp.zeros((), dtype=ctx.outputs[0].dtype)

    def run(y: Any, dy: Any) -> Any:
        return xp.multiply(dy, y > zero, out=out)

    return run


RELU = OpDef("relu", unary_float, kernel=_relu_kernel, grad=_relu_grad, name_prefix="Relu",
             doc="max(x, 0)")
RELU_GRAD = OpDef("relu_grad", lambda i, a: [i[1]], kernel=_relu_grad_kernel, not_differentiable=True,
                  name_prefix="ReluGrad", doc="dy where y > 0, else 0")

OPS = (RELU, RELU_GRAD)
