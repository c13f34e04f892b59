"""``assign``: a variable overwritten in place (legacy ``flow.assign`` and ``flow.system.assign``)."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, OpDef, ShapeError


# assign -------------------------------------------------------------------------------------------
def _assign_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    ref, value = inputs
    if ref != value:
        raise ShapeError(f"assign: value {value} must match the variable {ref}")
    return []


def _assign_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp

    def run(ref: Any, value: Any) -> None:
        xp.copyto(ref, value)

    return run


ASSIGN = OpDef("assign", _assign_infer, kernel=_assign_kernel, not_differentiable=True,
               doc="inputs (ref, value): the variable ref overwritten with value, in place, "
                   "after every other reader of ref in the step", compute=Compute(amp="black"),
               effects=Effects(mutates=(0,), effect=True))

OPS = (ASSIGN,)
