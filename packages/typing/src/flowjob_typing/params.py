"""Parameter kinds: how an annotated (or legacy default-valued) parameter is declared and fed."""
from __future__ import annotations

import typing
from typing import Any, Sequence

import numpy as np
from flowjob_core import Blob, InputSpec, JobArgumentError

from flowjob_typing.annotations import FixedTensorDef, ListListNumpy, ListNumpy, MirroredTensorDef, PlaceholderDef


class ArrayParam:
    """One placeholder fed by one array (``tp.Numpy.Placeholder``): shape and dtype must match exactly."""

    def __init__(self, definition: PlaceholderDef) -> None:
        self.definition = definition

    def input_specs(self) -> Sequence[InputSpec]:
        d = self.definition
        return [InputSpec(d.shape, d.dtype, d.batch_axis, d.name)]

    def build(self, blobs: Sequence[Blob]) -> Any:
        return blobs[0]

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        return [check_array(value, self.definition, where)]


class ListParam(ArrayParam):
    """``tp.ListNumpy.Placeholder``: a list with one array per device (one device here)."""

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        if not isinstance(value, (list, tuple)) or len(value) != 1:
            raise JobArgumentError(f"{where}: expected a list with one ndarray per device (1 device), "
                                   f"found {type(value).__name__}"
                                   + (f" of length {len(value)}" if isinstance(value, (list, tuple)) else ""))
        inner = value[0]
        if self.definition.family is ListListNumpy:
            if not isinstance(inner, (list, tuple)) or len(inner) != 1:
                raise JobArgumentError(f"{where}: expected a list (per device) of lists with one ndarray")
            inner = inner[0]
        return [check_array(inner, self.definition, where)]


class TupleParam:
    """``typing.Tuple[...]`` of placeholders: the caller passes a tuple (or list) of the same length."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def input_specs(self) -> Sequence[InputSpec]:
        return [s for item in self.items for s in item.input_specs()]

    def build(self, blobs: Sequence[Blob]) -> Any:
        out, i = [], 0
        for item in self.items:
            n = len(item.input_specs())
            out.append(item.build(blobs[i:i + n]))
            i += n
        return tuple(out)

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        if not isinstance(value, (tuple, list)) or len(value) != len(self.items):
            raise JobArgumentError(f"{where}: expected a tuple of {len(self.items)} inputs, found "
                                   f"{type(value).__name__}" + (f" of {len(value)}" if isinstance(value, (list, tuple)) else ""))
        return [a for i, (item, v) in enumerate(zip(self.items, value)) for a in item.feed(v, f"{where}[{i}]")]


def check_array(value: Any, definition: PlaceholderDef, where: str) -> np.ndarray:
    """Shape and dtype must match the placeholder; returns a C-contiguous copy the caller may not touch."""
    if not isinstance(value, np.ndarray):
        raise JobArgumentError(f"{where}: expected a numpy.ndarray of shape {definition.shape} and dtype "
                               f"{definition.dtype}, found {type(value).__name__}")
    if value.shape != definition.shape:
        raise JobArgumentError(f"{where}: expected shape {definition.shape}, found {value.shape}")
    if value.dtype != definition.dtype:
        raise JobArgumentError(f"{where}: expected dtype {definition.dtype}, found {value.dtype} "
                               f"(convert with .astype(np.{definition.dtype}))")
    return np.array(value, copy=True, order="C")


def match_param(annotation: Any) -> Any:
    if isinstance(annotation, PlaceholderDef):
        return ListParam(annotation) if issubclass(annotation.family, ListNumpy) else ArrayParam(annotation)
    if typing.get_origin(annotation) is tuple:
        items = [match_param(a) for a in typing.get_args(annotation)]
        return TupleParam(items) if items and all(i is not None for i in items) else None
    return None


def match_default(default: Any) -> Any:
    if isinstance(default, (FixedTensorDef, MirroredTensorDef)):
        return match_param(default)
    return None
