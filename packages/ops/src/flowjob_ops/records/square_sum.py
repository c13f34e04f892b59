"""square_sum and multi_square_sum: the sum of the squares of every element, legacy's building blocks of
gradient-norm clipping (``flow.experimental.square_sum``; ``multi_square_sum`` over a list of blobs, by
``flow.user_op_builder``). Both give a (1,) blob of the inputs' type; the sum runs in float64 for float32
inputs so that long lists add up without losing the small terms."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import require_floating, same_dtype


def _infer(op: str) -> Any:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        if not inputs:
            raise ShapeError(f"{op} needs at least one input")
        dtype = same_dtype(inputs, op)
        require_floating(inputs, op)
        return [BlobSpec((1,), dtype)]
    return infer


def _kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(*xs: Any) -> Any:
        flat = [x.reshape(-1).astype(np.float64, copy=False) for x in xs]
        out[0] = sum(xp.vdot(v, v) for v in flat)
        return out

    return run


def _grad(ctx: GradContext) -> list[Any]:
    # d/dx sum(x^2) = 2 x dy, dy being the (1,) output's gradient broadcast over x
    return [ctx.apply("multiply", [ctx.apply("scalar_mul", [x], {"scalar": 2.0}), ctx.dy])
            for x in ctx.inputs]


SQUARE_SUM = OpDef("square_sum", _infer("square_sum"), kernel=_kernel, grad=_grad,
                   doc="x -> (1,): the sum of x's squared elements", compute=Compute(amp="black"),
                   legacy=LegacyFace(input_names=("x",), attr_names=()))
MULTI_SQUARE_SUM = OpDef("multi_square_sum", _infer("multi_square_sum"), kernel=_kernel, grad=_grad,
                         doc="blobs -> (1,): the sum of the squared elements of every input",
                         compute=Compute(amp="black"), legacy=LegacyFace(input_names=("x",), attr_names=()))

OPS = (SQUARE_SUM, MULTI_SQUARE_SUM)
