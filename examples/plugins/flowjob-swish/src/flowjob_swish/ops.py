"""Op records: swish and the fused bias_add_gelu, each with its backward op.

An op is one ``flowjob_core.OpDef``: shape/dtype inference, a gradient rule that emits
graph nodes, and a kernel builder written once against ``xp`` (numpy or cupy).
Kernels write into the planned buffer (``ctx.out``) and private workspaces allocated when
the plan is built, so a step allocates nothing.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

GELU_K = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


# inference ------------------------------------------------------------------------
def _require_floating(op: str, specs: Sequence[BlobSpec]) -> None:
    for i, spec in enumerate(specs):
        if spec.dtype.kind != "f":
            raise ShapeError(f"{op} needs floating inputs, input {i} is {spec.dtype}")


def _require_same(op: str, a: BlobSpec, b: BlobSpec, what: str) -> None:
    if a != b:
        raise ShapeError(f"{op}: {what} must match the input, got {b} for input {a}")


def _swish_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 1:
        raise ShapeError(f"swish takes one input, got {len(inputs)}")
    _require_floating("swish", inputs)
    beta = attrs.get("beta", 1.0)
    if not isinstance(beta, (int, float)) or not math.isfinite(beta):
        raise ShapeError(f"swish: beta must be a finite number, got {beta!r}")
    return [inputs[0]]


def _swish_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, dy = inputs
    _require_floating("swish_grad", inputs)
    _require_same("swish_grad", x, dy, "the output gradient")
    return [x]


def _bias_add_gelu_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 2:
        raise ShapeError(f"bias_add_gelu takes x and b, got {len(inputs)} inputs")
    x, b = inputs
    _require_floating("bias_add_gelu", inputs)
    if not x.shape or b.shape != x.shape[-1:]:
        raise ShapeError(f"bias_add_gelu: b must have shape (x.shape[-1],) = {x.shape[-1:]}, got {b.shape}")
    if b.dtype != x.dtype:
        raise ShapeError(f"bias_add_gelu: b is {b.dtype}, x is {x.dtype}")
    return [x]


def _bias_add_gelu_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, b, dy = inputs
    _bias_add_gelu_infer((x, b), attrs)
    _require_same("bias_add_gelu_grad", x, dy, "the output gradient")
    return [x]


# kernels --------------------------------------------------------------------------
def _sigmoid(xp: Any, x: Any, beta: float, s: Any) -> Any:
    """s = sigmoid(beta x), as 0.5 (1 + tanh(beta x / 2)): no exp, so no overflow for large |x|."""
    xp.multiply(x, 0.5 * beta, out=s)
    xp.tanh(s, out=s)
    xp.add(s, 1.0, out=s)
    return xp.multiply(s, 0.5, out=s)


def _swish_kernel(ctx: KernelContext) -> Any:
    xp, out, beta = ctx.xp, ctx.out(0), float(ctx.attrs.get("beta", 1.0))
    s = ctx.workspace(ctx.outputs[0].shape, ctx.outputs[0].dtype)

    def run(x: Any) -> Any:
        return xp.multiply(x, _sigmoid(xp, x, beta, s), out=out)

    return run


def _swish_grad_kernel(ctx: KernelContext) -> Any:
    xp, out, beta = ctx.xp, ctx.out(0), float(ctx.attrs.get("beta", 1.0))
    spec = ctx.outputs[0]
    s, t = ctx.workspace(spec.shape, spec.dtype), ctx.workspace(spec.shape, spec.dtype)

    def run(x: Any, dy: Any) -> Any:
        # d/dx x s(beta x) = s (1 + beta x (1 - s))
        _sigmoid(xp, x, beta, s)
        xp.subtract(1.0, s, out=t)
        xp.multiply(t, x, out=t)
        xp.multiply(t, beta, out=t)
        xp.add(t, 1.0, out=t)
        xp.multiply(t, s, out=t)
        return xp.multiply(dy, t, out=out)

    return run


def _gelu_tanh(xp: Any, u: Any, t: Any) -> Any:
    """t = tanh(k (u + a u^3)) for the tanh approximation of gelu."""
    xp.multiply(u, u, out=t)
    xp.multiply(t, GELU_K * GELU_A, out=t)
    xp.add(t, GELU_K, out=t)
    xp.multiply(t, u, out=t)
    return xp.tanh(t, out=t)


def _bias_add_gelu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    u, t = ctx.workspace(spec.shape, spec.dtype), ctx.workspace(spec.shape, spec.dtype)

    def run(x: Any, b: Any) -> Any:
        xp.add(x, b, out=u)  # b broadcasts over the leading axes
        _gelu_tanh(xp, u, t)
        xp.add(t, 1.0, out=t)
        xp.multiply(t, 0.5, out=t)
        return xp.multiply(u, t, out=out)

    return run


def _bias_add_gelu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    u, t, w = (ctx.workspace(spec.shape, spec.dtype) for _ in range(3))

    def run(x: Any, b: Any, dy: Any) -> Any:
        # g(u) = 0.5 u (1 + t), t = tanh(k (u + a u^3));
        # g'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) k (1 + 3 a u^2)
        xp.add(x, b, out=u)
        _gelu_tanh(xp, u, t)
        xp.multiply(u, u, out=w)
        xp.multiply(w, 3.0 * GELU_A * GELU_K, out=w)
        xp.add(w, GELU_K, out=w)
        xp.multiply(w, u, out=w)  # u is free from here: it holds 1 - t^2
        xp.multiply(t, t, out=u)
        xp.subtract(1.0, u, out=u)
        xp.multiply(w, u, out=w)
        xp.multiply(w, 0.5, out=w)
        xp.add(t, 1.0, out=t)
        xp.multiply(t, 0.5, out=t)
        xp.add(w, t, out=w)
        return xp.multiply(dy, w, out=out)

    return run


# gradient rules -------------------------------------------------------------------
def _swish_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("swish_grad", [ctx.inputs[0], ctx.dy], {"beta": ctx.attrs.get("beta", 1.0)})]


def _bias_add_gelu_grad(ctx: GradContext) -> list[Any]:
    x, b = ctx.inputs
    du = ctx.apply("bias_add_gelu_grad", [x, b, ctx.dy])
    # the gradient of b is du summed over the leading axes: core's autodiff undoes the broadcast
    return [du if ctx.needs[0] else None, du if ctx.needs[1] else None]


# input_names / attr_names: what flow.user_op_builder("...").Op("swish").Input("x", [x]).Attr("beta", b) accepts;
# amp: the class under enable_auto_mixed_precision (flowjob_core.ir.opdef.AMP_CLASSES): swish stays float32,
# bias_add_gelu may run in float16 between GEMMs, as legacy's lists had it
SWISH = OpDef("swish", _swish_infer, kernel=_swish_kernel, grad=_swish_grad, doc="x * sigmoid(beta * x)",
              compute=Compute(amp="black"), legacy=LegacyFace(input_names=("x",), attr_names=("beta",)))
SWISH_GRAD = OpDef("swish_grad", _swish_grad_infer, kernel=_swish_grad_kernel, not_differentiable=True,
                   doc="dy * d swish(x) / dx")
BIAS_ADD_GELU = OpDef("bias_add_gelu", _bias_add_gelu_infer, kernel=_bias_add_gelu_kernel, grad=_bias_add_gelu_grad,
                      doc="gelu(x + b), b over the last axis, tanh approximation", compute=Compute(amp="gray"),
                      legacy=LegacyFace(input_names=("x", "b"), attr_names=()))
BIAS_ADD_GELU_GRAD = OpDef("bias_add_gelu_grad", _bias_add_gelu_grad_infer, kernel=_bias_add_gelu_grad_kernel,
                           not_differentiable=True, doc="dy * gelu'(x + b): the gradient of x, and of b before summing")

OPS = (SWISH, SWISH_GRAD, BIAS_ADD_GELU, BIAS_ADD_GELU_GRAD)
