"""The op records: ``myrelu`` (input ``in``, output ``out``) and its gradient ``myrelu_grad`` (``y``, ``dy``
-> ``dx``), the type and argument names of the legacy C++ op, so legacy wrappers call them unchanged."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError


def _myrelu_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 1:
        raise ShapeError(f"myrelu takes one input 'in', got {len(inputs)}")
    if inputs[0].dtype.kind != "f":
        raise ShapeError(f"myrelu needs a floating input, got {inputs[0].dtype}")
    return [inputs[0]]


def _myrelu_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    y, dy = inputs
    if y != dy:
        raise ShapeError(f"myrelu_grad: dy must match y, got {dy} for y {y}")
    return [y]


def _myrelu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        return xp.maximum(x, 0, out=out)

    return run


def _myrelu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(y: Any, dy: Any) -> Any:
        # dx = dy where the forward output is positive, else 0 (the C++ kernel's rule)
        xp.greater(y, 0, out=out)
        return xp.multiply(out, dy, out=out)

    return run


def _myrelu_grad(ctx: GradContext) -> list[Blob | None]:
    return [ctx.apply("myrelu_grad", [ctx.outputs[0], ctx.dy])]


MYRELU = OpDef("myrelu", _myrelu_infer, kernel=_myrelu_kernel, grad=_myrelu_grad,
               doc="max(x, 0): legacy's documented custom op", compute=Compute(amp="clear"),
               legacy=LegacyFace(input_names=("in",), attr_names=()))
MYRELU_GRAD = OpDef("myrelu_grad", _myrelu_grad_infer, kernel=_myrelu_grad_kernel, not_differentiable=True,
                    doc="dy where y > 0, else 0", legacy=LegacyFace(input_names=("y", "dy"), attr_names=()))

OPS = (MYRELU, MYRELU_GRAD)
