"""Result objects of the legacy API: local blobs and the future of an unannotated call."""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np


class LocalBlob:
    """A fetched value: ``.numpy()`` / ``.ndarray()``, and numpy attributes forwarded (``.mean()``)."""

    __slots__ = ("_array", "blob_def")

    def __init__(self, array: np.ndarray, blob_def: Any = None) -> None:
        self._array = array
        self.blob_def = blob_def

    def numpy(self, parallel_id: int | None = None) -> np.ndarray:
        return self._array

    def ndarray(self) -> np.ndarray:
        return self._array

    def numpy_list(self) -> list[np.ndarray]:
        return [self._array]

    ndarray_list = numpy_list

    def parallel_num(self) -> int:
        return 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._array, name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._array if dtype is None else self._array.astype(dtype)

    def __len__(self) -> int:
        return len(self._array)

    def __iter__(self) -> Any:
        return iter(self._array)

    def __getitem__(self, key: Any) -> Any:
        return self._array[key]

    def __repr__(self) -> str:
        return repr(self._array)

    def __str__(self) -> str:
        return str(self._array)


def _forward(name: str) -> Callable[..., Any]:
    def method(self: LocalBlob, *args: Any) -> Any:
        args = tuple(a._array if isinstance(a, LocalBlob) else a for a in args)
        return getattr(self._array, name)(*args)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__neg__", "__abs__", "__pow__", "__lt__", "__le__", "__gt__", "__ge__",
              "__eq__", "__ne__", "__float__", "__int__"):
    setattr(LocalBlob, _name, _forward(_name))
del _name


class FutureResult:
    """What an unannotated global function returns: ``.get()`` or ``.async_get(cb)``, each once."""

    def __init__(self, pending: Any, build: Callable[[list[Any]], Any], where: str) -> None:
        self._pending = pending
        self._build = build
        self._where = where
        self._used = False
        self._lock = threading.Lock()

    def _claim(self, how: str) -> None:
        with self._lock:
            if self._used:
                raise RuntimeError(f"{self._where}: the result was already delivered; {how} may be used once")
            self._used = True

    def get(self) -> Any:
        self._claim("get()")
        return self._build(self._pending.wait())

    def async_get(self, callback: Callable[[Any], None]) -> None:
        self._claim("async_get()")
        self._pending.detach()
        self._pending.add_done_callback(lambda values: callback(self._build(values)))
