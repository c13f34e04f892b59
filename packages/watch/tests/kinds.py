"""Minimal result kinds for the watch package's own tests (the ``watch`` tox env has no flowjob-typing)."""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np

from flowjob_core import InputSpec, hookimpl
from flowjob_core.trace.blob import Blob


class Array:
    """Parameter annotation ``Array((3,))`` (float32)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


class ArrayParam:
    def __init__(self, ann: Array) -> None:
        self.ann = ann

    def input_specs(self) -> Sequence[InputSpec]:
        return [InputSpec(self.ann.shape, np.dtype(np.float32))]

    def build(self, blobs: Sequence[Blob]) -> Any:
        return blobs[0]

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        return [np.array(value, np.float32, copy=True)]


class Later:
    """Return annotation: nothing, at once."""


class SyncNone:
    waits = True

    def flatten(self, value: Any, where: str) -> list[Blob]:
        return []

    def launch(self, pending: Any, where: str) -> None:
        pending.wait()


class LaterNone(SyncNone):
    waits = False

    def launch(self, pending: Any, where: str) -> None:
        pass  # returns at once; nobody waits


@hookimpl
def flowjob_add_result_kinds(registry: Any) -> None:
    registry.add_param_kind(lambda ann: ArrayParam(ann) if isinstance(ann, Array) else None)
    registry.add_return_kind(lambda ann: SyncNone() if ann is None else None)
    registry.add_return_kind(lambda ann: LaterNone() if ann is Later else None)
    registry.add_return_kind(lambda ann: SyncNone() if ann is inspect.Signature.empty else None)
