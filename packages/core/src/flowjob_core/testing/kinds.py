"""Bare result kinds for testing a package without flowjob-typing (core and optim tests use them).

``Array((3,), "float32")`` annotates a parameter; ``-> Sync`` returns a blob (or a tuple of
blobs) synchronously; ``-> Later`` returns the pending call at once; ``-> None`` (or no
annotation) returns nothing at once. A test plugin re-exports ``flowjob_add_result_kinds``.
"""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np

from flowjob_core.trace.blob import Blob
from flowjob_core.errors import JobArgumentError, JobReturnError
from flowjob_core.plugins.host import hookimpl
from flowjob_core.runtime.results import InputSpec


class Array:
    """Parameter annotation: one array of this shape and dtype."""

    def __init__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> None:
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


class Sync:
    """Return annotation: a blob or a tuple of blobs, delivered synchronously."""


class Later:
    """Return annotation: the call returns its ``PendingCall`` at once."""


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


class SyncReturn:
    waits = True

    def flatten(self, value: Any, where: str) -> list[Blob]:
        self.single = not isinstance(value, tuple)
        values = [value] if self.single else list(value)
        if not all(isinstance(v, Blob) for v in values):
            raise JobReturnError(f"{where}: expected a blob or a tuple of blobs")
        return values

    def launch(self, pending: Any, where: str) -> Any:
        values = pending.wait()
        return values[0] if self.single else tuple(values)


class LaterReturn:
    waits = False

    def __init__(self, hand_back: bool) -> None:
        self.hand_back = hand_back

    def flatten(self, value: Any, where: str) -> list[Blob]:
        return [] if value is None else [value]

    def launch(self, pending: Any, where: str) -> Any:
        return pending if self.hand_back else None


def _return_kind(ann: Any) -> Any:
    if ann is Sync:
        return SyncReturn()
    if ann is Later:
        return LaterReturn(hand_back=True)
    if ann in (None, inspect.Signature.empty):
        return LaterReturn(hand_back=False)
    return None


@hookimpl
def flowjob_add_result_kinds(registry: Any) -> None:
    registry.add_param_kind(lambda ann: ArrayParam(ann) if isinstance(ann, Array) else None)
    registry.add_return_kind(_return_kind)
