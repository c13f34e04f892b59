"""Converters for watched values, chosen by the handler's parameter annotation."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from flowjob_typing.annotations import ListListNumpy, ListNumpy, Numpy
from flowjob_typing.values import LocalBlob

_CONVERTERS: dict[Any, Callable[[Any, Any], Any]] = {
    Numpy: lambda value, blob: value,
    ListNumpy: lambda value, blob: [value],
    ListListNumpy: lambda value, blob: [[value]],
    inspect.Parameter.empty: lambda value, blob: LocalBlob(value, blob),  # unannotated: legacy local blob
}


def match_converter(annotation: Any) -> Callable[[Any, Any], Any] | None:
    return _CONVERTERS.get(annotation)
