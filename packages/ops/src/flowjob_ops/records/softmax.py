"""softmax and log_softmax along one axis, each with a fused gradient op."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef

from flowjob_ops.records.common import kept_dims_shape, normalize_axis, require_floating, same_dtype
from flowjob_ops import layout_rules


def _axis(attrs: dict, rank: int) -> int:
    axis = attrs.get("axis", -1)
    return normalize_axis(-1 if axis is None else axis, rank)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    require_floating(inputs, "softmax")
    if len(inputs) > 1:
        same_dtype(inputs, "softmax gradient")
    _axis(attrs, len(inputs[0].shape))
    return [inputs[-1]]


def _reduced(ctx: KernelContext) -> tuple[int, Any]:
    """The axis and a keepdims scratch buffer for the per-row max/sum."""
    spec = ctx.inputs[0]
    axis = _axis(ctx.attrs, len(spec.shape))
    return axis, ctx.scratch(kept_dims_shape(spec.shape, (axis,)), spec.dtype)


def _softmax_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis, red = _reduced(ctx)

    def run(x: Any) -> Any:
        xp.max(x, axis=axis, keepdims=True, out=red)  # shift: exp never overflows
        xp.subtract(x, red, out=out)
        xp.exp(out, out=out)
        xp.sum(out, axis=axis, keepdims=True, out=red)
        return xp.divide(out, red, out=out)

    return run


def _softmax_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("softmax_grad", [ctx.outputs[0], ctx.dy], {"axis": ctx.attrs.get("axis", -1)})]


def _softmax_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis, red = _reduced(ctx)

    def run(y: Any, dy: Any) -> Any:  # y * (dy - sum(dy * y))
        xp.multiply(dy, y, out=out)
        xp.sum(out, axis=axis, keepdims=True, out=red)
        xp.subtract(dy, red, out=out)
        return xp.multiply(out, y, out=out)

    return run


def _log_softmax_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis, red = _reduced(ctx)
    spec = ctx.inputs[0]
    tmp = ctx.scratch(spec.shape, spec.dtype)

    def run(x: Any) -> Any:  # (x - max) - log(sum(exp(x - max)))
        xp.max(x, axis=axis, keepdims=True, out=red)
        xp.subtract(x, red, out=out)
        xp.exp(out, out=tmp)
        xp.sum(tmp, axis=axis, keepdims=True, out=red)
        xp.log(red, out=red)
        return xp.subtract(out, red, out=out)

    return run


def _log_softmax_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("log_softmax_grad", [ctx.outputs[0], ctx.dy], {"axis": ctx.attrs.get("axis", -1)})]


def _log_softmax_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis, red = _reduced(ctx)

    def run(y: Any, dy: Any) -> Any:  # dy - exp(y) * sum(dy)
        xp.sum(dy, axis=axis, keepdims=True, out=red)
        xp.exp(y, out=out)
        xp.multiply(out, red, out=out)
        return xp.subtract(dy, out, out=out)

    return run


SOFTMAX = OpDef("softmax", _infer, kernel=_softmax_kernel, grad=_softmax_grad,
                doc="exp(x) / sum(exp(x)) along axis (default -1)",
                compute=Compute(layouts=layout_rules.softmax, amp="gray"))
SOFTMAX_GRAD = OpDef("softmax_grad", _infer, kernel=_softmax_grad_kernel, not_differentiable=True,
                     doc="y * (dy - sum(dy * y)) from the softmax output y",
                     compute=Compute(layouts=layout_rules.softmax_grad))
LOG_SOFTMAX = OpDef("log_softmax", _infer, kernel=_log_softmax_kernel, grad=_log_softmax_grad,
                    doc="x - log(sum(exp(x))) along axis (default -1)",
                    compute=Compute(layouts=layout_rules.log_softmax, amp="black"))
LOG_SOFTMAX_GRAD = OpDef("log_softmax_grad", _infer, kernel=_log_softmax_grad_kernel, not_differentiable=True,
                         doc="dy - exp(y) * sum(dy) from the log_softmax output y",
                         compute=Compute(layouts=layout_rules.log_softmax_grad))

OPS = (SOFTMAX, SOFTMAX_GRAD, LOG_SOFTMAX, LOG_SOFTMAX_GRAD)
