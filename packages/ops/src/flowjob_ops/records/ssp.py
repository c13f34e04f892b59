"""ssp_variable_proxy (legacy ``flow.experimental.ssp_variable_proxy``, stale-synchronous parallelism): a
variable's value as it was ``buffer_size`` steps ago.

Inputs: the variable, a ring buffer of ``buffer_size`` copies of it and a step counter (both variables the
API function makes). Each step the op stores the variable as it is before the step's writes in slot
``step % buffer_size`` and gives slot ``(step + 1) % buffer_size``, which holds the variable as it was when
step ``step - buffer_size + 1`` began, that is after step ``step - buffer_size``; on the first step every slot
starts as the variable, so the first ``buffer_size`` steps give its initial value. The node reads the
variable, so an assignment to it in the same job runs after it (``OpDef.effects.mutates``)."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, OpDef, ShapeError


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    var, ring, step = inputs
    if ring.shape[1:] != var.shape or ring.dtype != var.dtype:
        raise ShapeError(f"ssp_variable_proxy: the buffer {ring.shape} {ring.dtype} must hold copies of the "
                         f"variable {var.shape} {var.dtype}")
    if step.shape != (1,) or step.dtype.kind != "i":
        raise ShapeError(f"ssp_variable_proxy: the step counter must be a (1,) integer blob, got {step.shape}")
    return [BlobSpec(var.shape, var.dtype)]


def _kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    size = ctx.inputs[1].shape[0]

    def run(var: Any, ring: Any, step: Any) -> Any:
        count = int(step[0])  # one host read of a (1,) counter per step
        if count == 0:
            ring[...] = var
        ring[count % size] = var
        xp.copyto(out, ring[(count + 1) % size])
        step[0] = count + 1
        return out

    return run


SSP_VARIABLE_PROXY = OpDef(
    "ssp_variable_proxy", _infer, kernel=_kernel, not_differentiable=True,
    doc="(var, ring buffer, step) -> the variable as it was buffer_size steps ago", compute=Compute(amp="clear"),
    effects=Effects(mutates=(1, 2), effect=True))

OPS = (SSP_VARIABLE_PROXY,)
