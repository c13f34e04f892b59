"""A small plugin for core's own tests: a few ops and result kinds, no other flowjob package.

It also shows that result kinds and ops can come from any plugin, not only the sibling packages.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, OpDef, ShapeError, hookimpl
# the kit's bare result kinds; re-exporting the hook makes them part of this plugin
from flowjob_core.testing.kinds import Array, Later, Sync, flowjob_add_result_kinds  # noqa: F401


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def _twice_kernel(ctx: Any) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.multiply(x, 2, out=out)


def _twice_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("scalar_mul", [ctx.dy], {"scalar": 2.0})]


def _add_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    try:
        shape = np.broadcast_shapes(inputs[0].shape, inputs[1].shape)
    except ValueError:
        raise ShapeError(f"cannot broadcast {inputs[0].shape} and {inputs[1].shape}") from None
    return [BlobSpec(shape, inputs[0].dtype)]


def _add_kernel(ctx: Any) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda a, b: xp.add(a, b, out=out)


def _add_grad(ctx: Any) -> list[Any]:
    return [ctx.dy, ctx.dy]  # core's autodiff undoes the broadcasting


def _boom_kernel(ctx: Any) -> Any:
    def run(x: Any) -> Any:
        raise FloatingPointError("boom")
    return run


def _update_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    def run(var: Any, delta: Any) -> Any:
        xp.add(var, delta, out=var)
    return run


TWICE = OpDef("twice", _same, kernel=_twice_kernel, grad=_twice_grad)
TOY_ADD = OpDef("toy_add", _add_infer, kernel=_add_kernel, grad=_add_grad)
BOOM = OpDef("boom", _same, kernel=_boom_kernel, not_differentiable=True)
UPDATE = OpDef("toy_update", lambda i, a: [], kernel=_update_kernel, not_differentiable=True,
               effects=Effects(mutates=(0,)))


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (TWICE, TOY_ADD, BOOM, UPDATE):
        registry.add(op)
