"""Inference helpers shared by op records."""
from __future__ import annotations

from typing import Sequence

from flowjob_core import BlobSpec, ShapeError


def same_as_first(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def require_floating(inputs: Sequence[BlobSpec], op: str) -> None:
    for i, spec in enumerate(inputs):
        if spec.dtype.kind != "f":
            raise ShapeError(f"{op} needs floating inputs, input {i} is {spec.dtype}")


def unary_float(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    require_floating(inputs[:1], "this op")
    return [inputs[0]]
