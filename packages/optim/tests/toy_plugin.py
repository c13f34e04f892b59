"""A small plugin for the optim tests: placeholders, a synchronous return kind and a few
differentiable elementwise ops, so real train jobs run with only flowjob-core and flowjob-optim."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, OpDef, ShapeError, hookimpl
# the kit's bare result kinds; re-exporting the hook makes them part of this plugin
from flowjob_core.testing.kinds import Array, Later, Sync, flowjob_add_result_kinds  # noqa: F401


def _broadcast(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    try:
        shape = np.broadcast_shapes(inputs[0].shape, inputs[1].shape)
    except ValueError:
        raise ShapeError(f"cannot broadcast {inputs[0].shape} and {inputs[1].shape}") from None
    return [BlobSpec(shape, inputs[0].dtype)]


def _binary_kernel(fn_name: str) -> Any:
    def build(ctx: Any) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        fn = getattr(xp, fn_name)
        return lambda a, b: fn(a, b, out=out)
    return build


def _sub_grad(ctx: Any) -> list[Any]:
    return [ctx.dy, ctx.apply("scalar_mul", [ctx.dy], {"scalar": -1.0})]


def _mul_grad(ctx: Any) -> list[Any]:
    a, b = ctx.inputs
    return [ctx.apply("toy_mul", [ctx.dy, b]), ctx.apply("toy_mul", [ctx.dy, a])]


def _square_kernel(ctx: Any) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.multiply(x, x, out=out)


def _square_grad(ctx: Any) -> list[Any]:
    twice = ctx.apply("scalar_mul", [ctx.inputs[0]], {"scalar": 2.0})
    return [ctx.apply("toy_mul", [ctx.dy, twice])]


def _sum_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec((1,), inputs[0].dtype)]


def _sum_kernel(ctx: Any) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.sum(x.reshape(1, -1), axis=1, out=out)


def _sum_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("broadcast_to", [ctx.dy], {"shape": ctx.inputs[0].shape})]


SUB = OpDef("toy_sub", _broadcast, kernel=_binary_kernel("subtract"), grad=_sub_grad)
MUL = OpDef("toy_mul", _broadcast, kernel=_binary_kernel("multiply"), grad=_mul_grad)
SQUARE = OpDef("toy_square", lambda i, a: [i[0]], kernel=_square_kernel, grad=_square_grad)
SUM = OpDef("toy_sum", _sum_infer, kernel=_sum_kernel, grad=_sum_grad)


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (SUB, MUL, SQUARE, SUM):
        registry.add(op)
