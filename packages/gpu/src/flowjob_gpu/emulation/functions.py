"""numpy's functions as the emulated CuPy's: arguments unwrapped, host arrays refused, results on the device.

``device_function`` wraps any numpy function; ``ufunc`` wraps numpy's ufuncs with what CuPy's offer
(``reduce`` and ``accumulate`` for ``add`` and ``multiply`` only, ``at`` for the scatter ufuncs only,
as CuPy 14). The functions that take host data (``array``, ``asarray``, ``asnumpy``) and CuPy's own
helpers (``get_array_module``, ``fuse``, ``memoize``, ``vectorize``, ``broadcast``, ``r_``/``c_``/``mgrid``/
``ogrid``) are written here by hand.

Each is recorded instead of run while the current stream captures (``capture.py``); those that copy host data
over, or read a result's size back (``nonzero``, ``unique``), raise then, as CUDA refuses them during capture.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from flowjob_gpu.emulation.array import (
    check_dtype, device_op, host_array_refused, is_host_data, ndarray, to_device, unwrap, wrap)
from flowjob_gpu.emulation import host_traffic
from flowjob_gpu.emulation.cuda import recorder
from flowjob_gpu.emulation.names import parameters_of, snapshot
from flowjob_gpu.emulation.unemulated import complete_class

# numpy functions answering with a Python number where CuPy answers with a 0-d array
SCALARS_ON_DEVICE = frozenset({"count_nonzero", "array_equal", "array_equiv", "allclose"})


# functions whose result's size CuPy reads back from the device (a synchronization: refused during capture)
SIZED_ON_HOST = frozenset({"nonzero", "flatnonzero", "argwhere", "compress", "extract", "unique", "unique_all",
                           "unique_counts", "unique_inverse", "unique_values", "intersect1d", "setdiff1d",
                           "setxor1d", "union1d", "bincount"})


def _owners(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The emulated arrays a call was given: numpy may hand one's memory back (``out=``, no-op conversions)."""
    out = kwargs.get("out")
    return (*args, *(out if type(out) is tuple else (out,)))


def device_function(fn: Callable[..., Any], name: str, module: str = "cupy") -> Callable[..., Any]:
    """``fn`` (a numpy function) as the emulated CuPy's ``module.name``, taking the arguments CuPy's takes."""
    scalars = name in SCALARS_ON_DEVICE
    parameters = parameters_of(f"{module}.{name}")
    sized_on_host = name in SIZED_ON_HOST or name == "where"

    def emulated(*args: Any, **kwargs: Any) -> Any:
        capture = recorder()
        if capture is not None:
            if sized_on_host and (name != "where" or len(args) + len(kwargs) == 1):  # where(c): nonzero(c)
                capture.refuse(f"{module}.{name} (its result's size is read back to the host)")
            return capture.record(emulated, args, kwargs)
        if sized_on_host and (name != "where" or len(args) + len(kwargs) == 1):
            host_traffic.note(f"{module}.{name} (its result's size is read back)")
        if parameters is not None:
            parameters.check(args, kwargs)
        result = fn(*map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()})
        return to_device(result, _owners(args, kwargs), scalars)

    emulated.__name__ = emulated.__qualname__ = name
    emulated.__doc__ = f"{module}.{name} on flowjob's emulated device (numpy's {getattr(fn, '__name__', name)})."
    if parameters is not None:
        emulated.__signature__ = parameters.signature()  # type: ignore[attr-defined]
    return emulated


_UFUNC_KEYWORDS = frozenset({"out", "dtype", "casting"})
_SCALARS = (bool, int, float, complex, np.generic)


class ufunc:
    """A universal function of the emulated CuPy (``cupy.ufunc``), numpy's ufunc behind it."""

    def __init__(self, numpy_ufunc: Any, name: str) -> None:
        self._ufunc = numpy_ufunc  # a numpy ufunc, or a unary numpy function where CuPy has a ufunc (sinc)
        self.__name__ = name
        self.__doc__ = numpy_ufunc.__doc__

    @property
    def name(self) -> str:
        return f"cupy_{self.__name__}"

    @property
    def nin(self) -> int:
        return getattr(self._ufunc, "nin", 1)

    @property
    def nout(self) -> int:
        return getattr(self._ufunc, "nout", 1)

    @property
    def nargs(self) -> int:
        return self.nin + self.nout

    @property
    def types(self) -> list[str]:
        return list(getattr(self._ufunc, "types", ()))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        capture = recorder()
        if capture is not None:
            return capture.record(self, args, kwargs)
        unknown = kwargs.keys() - _UFUNC_KEYWORDS
        if unknown:  # numpy's where=, order=, subok=, signature=: CuPy's words
            raise TypeError(f"Wrong arguments {dict((k, kwargs[k]) for k in sorted(unknown))}")
        if not self.nin <= len(args) <= self.nargs:
            raise TypeError(f"Wrong number of arguments for {self.name!r}. It must be either {self.nin} or "
                            f"{self.nargs} (with outputs), but given {len(args)}.")
        for operand in args[:self.nin]:
            if type(operand) is not ndarray and not isinstance(operand, _SCALARS):
                raise host_array_refused(operand) if isinstance(operand, np.ndarray) else TypeError(
                    f"Unsupported type {type(operand)}")
        result = self._ufunc(*map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()})
        return to_device(result, _owners(args, kwargs))

    @device_op
    def reduce(self, array: ndarray, axis: Any = 0, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        self._supported("reduce", ("add", "multiply"))
        return to_device(self._ufunc.reduce(unwrap(array), axis, dtype, unwrap(out), keepdims), (out,))

    @device_op
    def accumulate(self, array: ndarray, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        self._supported("accumulate", ("add", "multiply"))
        return to_device(self._ufunc.accumulate(unwrap(array), axis, dtype, unwrap(out)), (out,))

    @device_op
    def reduceat(self, array: ndarray, indices: Any, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        self._supported("reduceat", ("add",))
        return to_device(self._ufunc.reduceat(unwrap(array), unwrap(indices), axis, dtype, unwrap(out)), (out,))

    @device_op
    def outer(self, A: Any, B: Any, **kwargs: Any) -> Any:
        return to_device(self._ufunc.outer(unwrap(A), unwrap(B), **{k: unwrap(v) for k, v in kwargs.items()}))

    @device_op
    def at(self, a: ndarray, indices: Any, b: Any = None) -> None:
        self._supported("at", tuple(snapshot().ufuncs_with_at))
        if type(a) is not ndarray:
            raise TypeError(f"{self.name}.at: the operand must be a cupy.ndarray, not {type(a)}")
        key = indices._array if type(indices) is ndarray else (
            tuple(k._array if type(k) is ndarray else k for k in indices) if type(indices) is tuple else indices)
        if b is None:
            self._ufunc.at(a._array, key)
        else:
            self._ufunc.at(a._array, key, unwrap(b))

    def _supported(self, method: str, names: tuple[str, ...]) -> None:
        if self.__name__ not in names:  # CuPy's words
            raise NotImplementedError(f"`{self.name}.{method}` is not supported yet")

    def __repr__(self) -> str:
        return f"<ufunc '{self.name}'>"


complete_class(ufunc, snapshot().classes["cupy.ufunc"])


def _host_or_device(value: Any) -> Any:
    """Data for ``cupy.array``: host data as it is, emulated arrays (also in lists) unwrapped."""
    kind = type(value)
    if kind is ndarray:
        return value._array
    if kind is list or kind is tuple:
        return kind(map(_host_or_device, value))
    return value


def _on_device(result: np.ndarray) -> ndarray:
    check_dtype(result.dtype)
    return wrap(result)


def array(obj: Any, dtype: Any = None, copy: bool = True, order: str = "K", subok: bool = False, ndmin: int = 0,
          *, blocking: bool = False) -> ndarray:
    """A device array from host data (a copy, as every host-to-device transfer) or from a device array."""
    capture = recorder()
    if capture is not None:
        if is_host_data(obj):
            capture.refuse("cupy.array of host data (a host-to-device copy)")
        return capture.record(array, (obj, dtype, copy, order, subok, ndmin), {"blocking": blocking})
    if is_host_data(obj):
        host_traffic.note("cupy.array of host data")
    if type(obj) is ndarray and not copy:
        return asarray(obj, dtype, order) if ndmin <= obj.ndim else array(obj, dtype, True, order, subok, ndmin)
    return _on_device(np.array(_host_or_device(obj), dtype=dtype, order=order, ndmin=ndmin))


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None,
            blocking: bool = False) -> ndarray:
    """``a`` on the device: itself where it is one already (and of ``dtype``; unless ``copy``), else a copy."""
    capture = recorder()
    if capture is not None:
        if is_host_data(a):
            capture.refuse("cupy.asarray of host data (a host-to-device copy)")
        return capture.record(asarray, (a, dtype, order), {"copy": copy, "blocking": blocking})
    if copy is False and type(a) is not ndarray:
        raise ValueError("Unable to avoid copy while creating an array from host data as requested.")
    if copy:
        return array(a, dtype, True, order or "K")
    if is_host_data(a):
        host_traffic.note("cupy.asarray of host data")
    if type(a) is ndarray:
        got = np.asarray(a._array, dtype=dtype, order=order)
        return a if got is a._array else wrap(got)
    return _on_device(np.array(_host_or_device(a), dtype=dtype, order=order or "K"))


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: np.ndarray | None = None, *,
            blocking: bool = True) -> np.ndarray:
    """A host copy of a device array; anything else as ``numpy.asarray`` takes it (as CuPy)."""
    if type(a) is ndarray:
        return a.get(stream, order, out, blocking)
    host = np.asarray(a, order=order)
    if out is not None:
        np.copyto(out, host)
        return out
    return host


def get_array_module_of(cupy: Any) -> Callable[..., Any]:
    def get_array_module(*args: Any) -> Any:
        """The emulated cupy where an argument is a device array, else numpy."""
        return cupy if any(type(a) is ndarray for a in args) else np
    return get_array_module


def fuse(*args: Any, **kwargs: Any) -> Any:
    """CuPy compiles the function into one kernel; the emulation runs it as it is."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


_memos: list[dict[Any, Any]] = []


def memoize(for_each_device: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A cache of the decorated function's results by arguments (``clear_memo`` empties every one)."""
    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        memo: dict[Any, Any] = {}
        _memos.append(memo)

        @functools.wraps(fn)
        def cached(*args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            if key not in memo:
                memo[key] = fn(*args, **kwargs)
            return memo[key]
        return cached
    return decorator


def clear_memo() -> None:
    for memo in _memos:
        memo.clear()


class vectorize:
    """``cupy.vectorize``: the Python function applied elementwise (CuPy compiles it; numpy loops here)."""

    def __init__(self, pyfunc: Callable[..., Any], otypes: Any = None, doc: str | None = None,
                 excluded: Any = None, cache: bool = False, signature: str | None = None) -> None:
        self._vectorized = np.vectorize(pyfunc, otypes=otypes, doc=doc, excluded=excluded, cache=cache,
                                        signature=signature)
        self.__doc__ = doc or pyfunc.__doc__

    @device_op
    def __call__(self, *args: Any) -> Any:
        return to_device(self._vectorized(*map(unwrap, args)))


class broadcast:
    """``cupy.broadcast``: the arrays as broadcast views, with their common shape."""

    def __init__(self, *arrays: Any) -> None:
        views = np.broadcast_arrays(*map(unwrap, arrays))
        self._values = tuple(wrap(v) for v in views)
        self._shape = np.broadcast_shapes(*(v.shape for v in views))

    @property
    def values(self) -> tuple[ndarray, ...]:
        return self._values

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def nd(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape))


complete_class(broadcast, snapshot().classes["cupy.broadcast"])


class IndexTrick:
    """``cupy.r_``, ``c_``, ``mgrid``, ``ogrid``: numpy's, indexed with device arrays, giving device arrays."""

    def __init__(self, trick: Any) -> None:
        self._trick = trick

    @device_op
    def __getitem__(self, key: Any) -> Any:
        return to_device(self._trick[unwrap(key)])
