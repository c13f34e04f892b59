"""The annotation vocabulary of ``oneflow.typing``: what users write in signatures."""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import numpy as np
from flowjob_core import JobDefinitionError
from flowjob_core.ir import dtypes
from flowjob_core.ir import naming


@dataclass(frozen=True)
class PlaceholderDef:
    """An input declaration: ``tp.Numpy.Placeholder((100, 784), dtype=flow.float)``."""

    family: type
    shape: tuple[int, ...]
    dtype: np.dtype
    batch_axis: int | None = 0
    name: str | None = None

    def __repr__(self) -> str:
        return (f"tp.{self.family.__name__}.Placeholder({self.shape}, dtype={self.dtype.name}, "
                f"batch_axis={self.batch_axis})")


def _placeholder(family: type, shape: Any, dtype: Any, batch_axis: Any, name: str | None = None,
                 where: str = "") -> PlaceholderDef:
    where = where or f"tp.{family.__name__}.Placeholder"
    if not isinstance(shape, tuple):
        raise JobDefinitionError(f"{where}: shape should be a tuple such as (100, 784), found "
                                 f"{type(shape).__name__} {shape!r}")
    if not shape or any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d <= 0 for d in shape):
        raise JobDefinitionError(f"{where}: shape must hold positive ints, found {shape!r}")
    if batch_axis is not None:
        in_range = isinstance(batch_axis, int) and -len(shape) <= batch_axis < len(shape)
        if isinstance(batch_axis, bool) or not in_range:
            raise JobDefinitionError(f"{where}: batch_axis {batch_axis!r} is not an axis of shape {shape} (or None)")
        batch_axis %= len(shape)
    try:
        dt = dtypes.as_dtype(dtype)
    except TypeError as exc:
        raise JobDefinitionError(f"{where}: {exc}") from None
    return PlaceholderDef(family, tuple(int(d) for d in shape), dt, batch_axis, name)


def describe(annotation: Any) -> str:
    """A short readable name for an annotation in error messages (``tp.Numpy``, ``Tuple[tp.Numpy, int]``)."""
    if isinstance(annotation, type) and issubclass(annotation, Numpy):
        return f"tp.{annotation.__name__}"
    if isinstance(annotation, _Generic):
        return f"tp.{type(annotation).__name__}[{describe(annotation.inner)}]"
    if isinstance(annotation, type) and issubclass(annotation, _Generic):
        return f"tp.{annotation.__name__}"
    if annotation is Any:
        return "Any"
    origin = typing.get_origin(annotation)
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else describe(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', origin).capitalize()}[{args}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return repr(annotation)


class Numpy:
    """A fixed-shape ``numpy.ndarray``: as a return annotation, a synchronous result."""

    @classmethod
    def Placeholder(cls, shape: tuple[int, ...], dtype: Any = dtypes.float32,  # noqa: N802
                    batch_axis: int | None = 0) -> PlaceholderDef:
        return _placeholder(cls, shape, dtype, batch_axis)


class ListNumpy(Numpy):
    """A list with one ``numpy.ndarray`` per device (the mirrored view)."""


class ListListNumpy(Numpy):
    """A list per device of lists of arrays (mirrored tensor lists)."""


class _Generic:
    """Base of subscriptable annotations such as ``Callback[T]``."""

    __slots__ = ("inner",)
    _name = ""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __class_getitem__(cls, inner: Any) -> "_Generic":
        return cls(inner)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.inner == self.inner  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), repr(self.inner)))

    def __repr__(self) -> str:
        return describe(self)


class Callback(_Generic):
    """``-> tp.Callback[T]``: the call returns ``f(cb)``; ``cb`` gets the result converted per ``T``."""


class Bundle(_Generic):
    """``-> tp.Bundle[tp.Numpy]``: any nesting of tuples, lists and dicts with leaves converted."""


class Future(_Generic):
    """``-> tp.Future[T]``: the call returns an awaitable for asyncio code (``await job(x)``)."""


Dict = typing.Dict  # the docs name ``flow.typing.Dict``; legacy code used ``typing.Dict``


class FixedTensorDef(PlaceholderDef):
    """Version-0.1 input declared as a default value: ``x=flow.FixedTensorDef((10,))``."""


class MirroredTensorDef(PlaceholderDef):
    """Version-0.1 mirrored input declared as a default value."""


class MirroredTensorListDef(PlaceholderDef):
    """Version-0.1 mirrored tensor-list input declared as a default value (per device a list of arrays)."""


def _legacy_def(cls: type, family: type, shape: Any, dtype: Any, batch_axis: Any, name: str | None) -> Any:
    where = f"flow.{cls.__name__}"
    base = _placeholder(family, tuple(shape) if isinstance(shape, list) else shape, dtype, batch_axis, where=where)
    # legacy took one name id when the default was evaluated and another when it was cloned at compile
    naming.next_id()
    return cls(base.family, base.shape, base.dtype, base.batch_axis, name)


def fixed_tensor_def(shape: Any, dtype: Any = dtypes.float32, batch_axis: int | None = 0,
                     name: str | None = None) -> FixedTensorDef:
    """``flow.FixedTensorDef(shape, dtype)``: a fixed-shape input declared as a default value."""
    return _legacy_def(FixedTensorDef, Numpy, shape, dtype, batch_axis, name)


def mirrored_tensor_def(shape: Any, dtype: Any = dtypes.float32, batch_axis: int | None = 0,
                        name: str | None = None) -> MirroredTensorDef:
    """``flow.MirroredTensorDef(shape, dtype)``: a per-device input (a list of one array per device)."""
    return _legacy_def(MirroredTensorDef, ListNumpy, shape, dtype, batch_axis, name)


def mirrored_tensor_list_def(shape: Any, dtype: Any = dtypes.float32, batch_axis: int | None = 0,
                             name: str | None = None) -> MirroredTensorListDef:
    """``flow.MirroredTensorListDef(shape, dtype)``: a list of arrays per device, at most ``shape``'s elements."""
    return _legacy_def(MirroredTensorListDef, ListListNumpy, shape, dtype, batch_axis, name)
