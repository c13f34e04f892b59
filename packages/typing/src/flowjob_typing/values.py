"""Result objects: local blobs, the legacy future of an unannotated call, the asyncio result."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Generator

import numpy as np
from flowjob_core.plan.mirrored import PerDevice, TensorList, dense
from flowjob_core.runtime.one_element import one_element


def logical(value: Any, blob: Any) -> np.ndarray:
    """One array for a fetched value: device pieces of a mirrored step concatenated on the batch axis
    (a tensor list as its body, the elements concatenated on axis 0)."""
    if type(value) is PerDevice:
        return one_element(value.merged(getattr(blob, "batch_axis", None), getattr(blob, "lbn", "a value")))
    if type(value) is TensorList:
        return value.body(getattr(blob, "lbn", "a value"))
    return one_element(value)


def per_device(value: Any) -> list[np.ndarray]:
    """One array per device (a single device: a list of one; a tensor list as its body)."""
    if type(value) is PerDevice:
        return [one_element(dense(v)) for v in value]
    return [one_element(dense(value))]


def per_device_lists(value: Any) -> list[list[np.ndarray]]:
    """Per device the list of arrays (legacy ``numpy_lists``): a tensor list's elements, else the one array."""
    pieces = value if type(value) is PerDevice else [value]
    return [list(v) if type(v) is TensorList else [v] for v in pieces]


class LocalBlob:
    """A fetched value: ``.numpy()`` / ``.ndarray()``, ``.is_dynamic``, and numpy attributes forwarded
    (``.mean()``, ``.shape``, ``.dtype``), as legacy's local blob; what un-annotated watch handlers and
    un-annotated global functions' results are.

    After a mirrored step it holds one piece per device: ``.numpy()`` concatenates them on
    the batch axis, ``.numpy(i)`` and ``.numpy_list()`` give the pieces.
    """

    __slots__ = ("_value", "_array", "blob_def")

    def __init__(self, value: Any, blob_def: Any = None) -> None:
        self._value = value
        self._array: np.ndarray | None = None if type(value) in (PerDevice, TensorList) else one_element(value)
        self.blob_def = blob_def

    def numpy(self, parallel_id: int | None = None) -> np.ndarray:
        if parallel_id is not None:
            return per_device(self._value)[parallel_id]
        if self._array is None:
            self._array = logical(self._value, self.blob_def)
        return self._array

    def ndarray(self) -> np.ndarray:
        """The version-0.1 name of ``numpy()``."""
        return self.numpy()

    def numpy_list(self) -> list[np.ndarray]:
        return per_device(self._value)

    ndarray_list = numpy_list

    def numpy_lists(self) -> list[list[np.ndarray]]:
        return per_device_lists(self._value)

    ndarray_lists = numpy_lists

    def parallel_num(self) -> int:
        return len(self._value) if type(self._value) is PerDevice else 1

    @property
    def is_dynamic(self) -> bool:
        """Whether the blob it was fetched from is dynamic (legacy's ``LocalBlob.is_dynamic``: a mirrored
        placeholder's blob and what is computed from it; ``numpy_list()`` then gives the device pieces)."""
        return bool(getattr(self.blob_def, "is_dynamic", False))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.numpy(), name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __len__(self) -> int:
        return len(self.numpy())

    def __iter__(self) -> Any:
        return iter(self.numpy())

    def __getitem__(self, key: Any) -> Any:
        return self.numpy()[key]

    def __repr__(self) -> str:
        return repr(self.numpy())

    def __str__(self) -> str:
        return str(self.numpy())

    def __format__(self, spec: str) -> str:
        return format(self.numpy(), spec)

    def __bool__(self) -> bool:
        return bool(self.numpy())

    __hash__ = None  # type: ignore[assignment]  # like an ndarray: == is elementwise


def _forward(name: str) -> Callable[..., Any]:
    def method(self: LocalBlob, *args: Any) -> Any:
        args = tuple(a.numpy() if isinstance(a, LocalBlob) else a for a in args)
        return getattr(self.numpy(), name)(*args)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__matmul__", "__rmatmul__",
              "__neg__", "__pos__", "__abs__", "__pow__", "__rpow__", "__lt__", "__le__", "__gt__", "__ge__",
              "__eq__", "__ne__", "__float__", "__int__", "__index__"):
    setattr(LocalBlob, _name, _forward(_name))
del _name


class FutureResult:
    """What an unannotated (legacy) global function returns: ``.get()`` or ``.async_get(cb)``, once."""

    __slots__ = ("_pending", "_build", "_where", "_used", "_lock")

    def __init__(self, pending: Any, build: Callable[[list[Any]], Any], where: str) -> None:
        self._pending = pending
        self._build = build
        self._where = where
        self._used = False
        self._lock = threading.Lock()

    def _claim(self, how: str) -> None:
        with self._lock:
            if self._used:
                raise RuntimeError(f"{self._where}: this result was already delivered; get() or async_get() "
                                   f"may be used once per call ({how} called again)")
            self._used = True

    def get(self) -> Any:
        """Wait for the step and its watch handlers; the returned structure of local blobs."""
        self._claim("get()")
        return self._build(self._pending.wait())

    def async_get(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(result)`` when the step is done (on the executor thread, or now if it is)."""
        if not callable(callback):
            raise TypeError(f"{self._where}: async_get needs a callable, got {callback!r}")
        self._claim("async_get()")
        self._pending.add_done_callback(lambda values: callback(self._build(values)))


class AsyncResult:
    """What a ``-> tp.Future[T]`` function returns: ``await`` it in asyncio code (or ``.result()``).

    Awaiting is a synchronous point of the session: the step's own failure, or an error a
    callback left earlier, is raised by the ``await``.
    """

    __slots__ = ("_pending", "_build")

    def __init__(self, pending: Any, build: Callable[[list[Any]], Any]) -> None:
        self._pending = pending
        self._build = build

    def done(self) -> bool:
        return self._pending.done()

    def result(self) -> Any:
        """Block until the step is done and return the converted result."""
        return self._build(self._pending.wait())

    def __await__(self) -> Generator[Any, None, Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle() -> None:
            if future.cancelled():
                return
            try:
                future.set_result(self.result())  # done already: returns at once
            except BaseException as exc:  # the step's failure or a kept callback error
                future.set_exception(exc)

        def wake(_: Any) -> None:  # on the executor thread: hand over to the loop's thread
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:
                pass  # the loop closed; nobody awaits any more

        self._pending.on_done(wake)
        return (yield from future.__await__())
