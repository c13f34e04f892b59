"""A small plugin for core's own tests: a few ops and result kinds, no other flowjob package.

It also shows that result kinds and ops can come from any plugin, not only the sibling packages.
"""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, InputSpec, JobArgumentError, JobReturnError, OpDef, ShapeError, hookimpl
from flowjob_core.blob import Blob


class Array:
    """Parameter annotation ``Array((3,), "float32")``."""

    def __init__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)


class ArrayParam:
    def __init__(self, ann: Array) -> None:
        self.ann = ann

    def input_specs(self) -> Sequence[InputSpec]:
        return [InputSpec(self.ann.shape, self.ann.dtype)]

    def build(self, blobs: Sequence[Blob]) -> Any:
        return blobs[0]

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        if not isinstance(value, np.ndarray) or value.shape != self.ann.shape or value.dtype != self.ann.dtype:
            raise JobArgumentError(f"{where}: expected {self.ann.shape} {self.ann.dtype}, got {value!r}")
        return [value.copy()]


class Sync:
    """Return annotation: one array, synchronously."""


class Later:
    """Return annotation: nothing; the call returns at once."""


class SyncReturn:
    waits = True

    def flatten(self, value: Any, where: str) -> list[Blob]:
        if not isinstance(value, Blob):
            raise JobReturnError(f"{where}: expected a blob")
        return [value]

    def launch(self, pending: Any, where: str) -> Any:
        return pending.wait()[0]


class LaterReturn:
    waits = False

    def flatten(self, value: Any, where: str) -> list[Blob]:
        return [] if value is None else [value]

    def launch(self, pending: Any, where: str) -> Any:
        pending.detach()
        return pending


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


TWICE = OpDef("twice", _same, kernel=_twice_kernel, grad=_twice_grad, name_prefix="Twice")
TOY_ADD = OpDef("toy_add", _add_infer, kernel=_add_kernel, grad=_add_grad, name_prefix="ToyAdd")
BOOM = OpDef("boom", _same, kernel=_boom_kernel, not_differentiable=True, name_prefix="Boom")
UPDATE = OpDef("toy_update", lambda i, a: [], kernel=_update_kernel, not_differentiable=True, mutates=(0,),
               name_prefix="ToyUpdate")


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (TWICE, TOY_ADD, BOOM, UPDATE):
        registry.add(op)


@hookimpl
def flowjob_add_result_kinds(registry: Any) -> None:
    registry.add_param_kind(lambda ann: ArrayParam(ann) if isinstance(ann, Array) else None)
    registry.add_return_kind(lambda ann: SyncReturn() if ann is Sync else None)
    registry.add_return_kind(lambda ann: LaterReturn() if ann in (Later, inspect.Signature.empty) else None)
