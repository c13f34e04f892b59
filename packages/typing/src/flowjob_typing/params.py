"""Parameter kinds: how an annotated (or legacy default-valued) parameter is declared and fed.

Every fed array is checked (type, shape, dtype) and copied at call time, so the caller may
reuse its arrays at once. A mirrored parameter (``tp.ListNumpy.Placeholder``) takes one array
per device and feeds a ``PerDevice``; core checks the count against the configured devices
and runs the step once per device slice.

Mirrored placeholders are dynamic as in legacy: the declared shape is a maximum, and an array
of the same rank with at most the declared number of elements is accepted (legacy checked the
element count, not each dim); core runs the job on the actual shape (``flowjob_core.plan.dynamic``).
A ``tp.ListListNumpy`` placeholder takes per device a list of such arrays whose element counts
add up to at most the declared one (legacy ``MirroredTensorListDef``); several arrays feed a
``TensorList``. Fixed placeholders (``tp.Numpy``) need the exact shape.
"""
from __future__ import annotations

import typing
from typing import Any, Sequence

import numpy as np
from flowjob_core import Blob, InputSpec, JobArgumentError
from flowjob_core.plan.mirrored import PerDevice, TensorList

from flowjob_typing.annotations import (
    FixedTensorDef, ListListNumpy, ListNumpy, MirroredTensorDef, MirroredTensorListDef, PlaceholderDef)


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
    """``tp.ListNumpy.Placeholder``: a list with one array per device, each at most the declared (per-device) shape.

    ``tp.ListListNumpy.Placeholder``: per device a list of arrays (a tensor list) holding at most the
    declared number of elements in all.
    """

    dynamic = True  # its blobs are legacy's dynamic blobs (Blob.is_dynamic): the declared shape is a maximum

    @property
    def tensor_list(self) -> bool:
        """Whether its blobs are legacy's tensor lists (Blob.is_tensor_list): a tp.ListListNumpy placeholder."""
        return self.definition.family is ListListNumpy

    def feed(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, (list, tuple)) or not value:
            raise JobArgumentError(f"{where}: expected a list with one ndarray per device, found {_found(value)}")
        definition = self.definition
        pieces = PerDevice()
        if definition.family is not ListListNumpy:
            for d, item in enumerate(value):
                pieces.append(check_array(item, definition, f"{where}[{d}]", dynamic=True))
            return [pieces]
        capacity = _count(definition.shape)
        for d, items in enumerate(value):
            if not isinstance(items, (list, tuple)) or not items:
                raise JobArgumentError(f"{where}[{d}]: expected a list of ndarrays (a tensor list), "
                                       f"found {_found(items)}")
            arrays = [check_array(a, definition, f"{where}[{d}][{j}]", dynamic=True) for j, a in enumerate(items)]
            total = sum(a.size for a in arrays)
            if total > capacity:
                raise JobArgumentError(f"{where}[{d}]: the tensor list holds {total} elements "
                                       f"({[a.shape for a in arrays]}), more than the declared shape "
                                       f"{definition.shape} holds ({capacity})")
            pieces.append(arrays[0] if len(arrays) == 1 else TensorList(arrays))
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


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def check_array(value: Any, definition: PlaceholderDef, where: str, dynamic: bool = False) -> np.ndarray:
    """Shape and dtype must match the placeholder; returns a C-contiguous copy the caller may not touch.

    ``dynamic`` (mirrored placeholders): the declared shape is a maximum; the array needs its rank and
    at most its element count.
    """
    if not isinstance(value, np.ndarray):
        raise JobArgumentError(f"{where}: expected a numpy.ndarray of shape {definition.shape} and dtype "
                               f"{definition.dtype}, found {_found(value)}")
    if value.shape != definition.shape:
        if not dynamic:
            raise JobArgumentError(f"{where}: expected shape {definition.shape}, found {value.shape}")
        if value.ndim != len(definition.shape) or value.size > _count(definition.shape):
            raise JobArgumentError(f"{where}: expected an array of rank {len(definition.shape)} with at most "
                                   f"{_count(definition.shape)} elements (declared shape {definition.shape}, a "
                                   f"maximum), found shape {value.shape}")
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
    """Version 0.1: ``x=flow.FixedTensorDef(shape)`` / ``flow.MirroredTensorDef(shape)`` /
    ``flow.MirroredTensorListDef(shape)`` as a default value."""
    if isinstance(default, (FixedTensorDef, MirroredTensorDef, MirroredTensorListDef)):
        return match_param(default)
    return None
