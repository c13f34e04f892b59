"""Integer division, as legacy's integer broadcast_div kernels computed it: C's ``a / b``.

The quotient is truncated toward zero (-7 / 2 is -3, where numpy's ``//`` gives -4). A zero
divisor has no defined result in C (legacy's CPU kernel died of SIGFPE, its GPU kernel returned
garbage), so here the step fails with an error naming the job and the op, and the session stays
usable. The one overflowing case, the type's minimum divided by -1, wraps around to the minimum as
two's complement arithmetic does. Integer results carry no gradient.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import broadcast_shape, same_dtype


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dtype = same_dtype(inputs, "int_divide")
    if dtype.kind not in "iu":
        raise ShapeError(f"int_divide needs integer inputs, got {dtype} (floating blobs use divide)")
    return [BlobSpec(broadcast_shape(inputs[0].shape, inputs[1].shape, "int_divide operands"), dtype)]


def _kernel(ctx: KernelContext) -> Any:
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


INT_DIVIDE = OpDef("int_divide", _infer, kernel=_kernel, not_differentiable=True, name_prefix="Divide",
                   doc="a / b on integer blobs with broadcasting, truncated toward zero (C's integer division)")

OPS = [INT_DIVIDE]
