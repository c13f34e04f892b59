"""Parameter kinds: how an annotated (or legacy default-valued) parameter is declared and fed.

Every fed array is checked (type, shape, dtype) and copied at call time, so the caller may
reuse its arrays at once. A mirrored parameter (``tp.ListNumpy.Placeholder``) takes one array
per device and feeds a ``PerDevice``; core checks the count against the configured devices
and runs the step once per device slice.
"""
from __future__ import annotations

import typing
from typing import Any, Sequence

import numpy as np
from flowjob_core import Blob, InputSpec, JobArgumentError
from flowjob_core.mirrored import PerDevice

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

    def feed(self, value: Any, where: str) -> list[Any]:
        return [check_array(value, self.definition, where)]


class ListParam(ArrayParam):
    """``tp.ListNumpy.Placeholder``: a list with one array per device, each of the declared (per-device) shape.

    ``tp.ListListNumpy.Placeholder``: per device a list holding one array (static shapes only).
    """

    def feed(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, (list, tuple)) or not value:
            raise JobArgumentError(f"{where}: expected a list with one ndarray per device, found {_found(value)}")
        nested = self.definition.family is ListListNumpy
        pieces = PerDevice()
        for d, item in enumerate(value):
            if nested:
                if not isinstance(item, (list, tuple)) or len(item) != 1:
                    raise JobArgumentError(f"{where}[{d}]: expected a list holding one ndarray (a tensor list "
                                           f"of static shape), found {_found(item)}")
                item = item[0]
            pieces.append(check_array(item, self.definition, f"{where}[{d}]"))
        return [pieces]


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

    def feed(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, (tuple, list)) or len(value) != len(self.items):
            raise JobArgumentError(f"{where}: expected a tuple of {len(self.items)} inputs, found {_found(value)}")
        return [a for i, (item, v) in enumerate(zip(self.items, value)) for a in item.feed(v, f"{where}[{i}]")]


def _found(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


def check_array(value: Any, definition: PlaceholderDef, where: str) -> np.ndarray:
    """Shape and dtype must match the placeholder; returns a C-contiguous copy the caller may not touch."""
    if not isinstance(value, np.ndarray):
        raise JobArgumentError(f"{where}: expected a numpy.ndarray of shape {definition.shape} and dtype "
                               f"{definition.dtype}, found {_found(value)}")
    if value.shape != definition.shape:
        raise JobArgumentError(f"{where}: expected shape {definition.shape}, found {value.shape}")
    if value.dtype != definition.dtype:
        raise JobArgumentError(f"{where}: expected dtype {definition.dtype}, found {value.dtype} "
                               f"(convert with .astype(np.{definition.dtype}))")
    return np.array(value, copy=True, order="C")


def match_param(annotation: Any) -> Any:
    """The parameter kind of an annotation, or None."""
    if isinstance(annotation, PlaceholderDef):
        mirrored = issubclass(annotation.family, (ListNumpy, ListListNumpy))
        return ListParam(annotation) if mirrored else ArrayParam(annotation)
    if typing.get_origin(annotation) is tuple:
        items = [match_param(a) for a in typing.get_args(annotation)]
        return TupleParam(items) if items and all(i is not None for i in items) else None
    return None


def match_default(default: Any) -> Any:
    """Version 0.1: ``x=flow.FixedTensorDef(shape)`` / ``flow.MirroredTensorDef(shape)`` as a default value."""
    if isinstance(default, (FixedTensorDef, MirroredTensorDef)):
        return match_param(default)
    return None
