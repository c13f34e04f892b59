"""The emulated CuPy's submodules that are numpy's under CuPy's names: ``linalg``, ``fft``, ``lib``
(``stride_tricks``), ``exceptions``, ``typing``."""
from __future__ import annotations

import __future__
from typing import Any, Callable

import numpy as np
import numpy.typing

from flowjob_gpu.emulation.array import ndarray, to_device, unwrap
from flowjob_gpu.emulation.functions import device_function
from flowjob_gpu.emulation.modules import EmulatedModule
from flowjob_gpu.emulation.names import parameters_of, snapshot
from flowjob_gpu.emulation.unemulated import UnemulatedModule


def matrix_transpose(x: np.ndarray) -> np.ndarray:
    """numpy >= 2's ``matrix_transpose``, for numpy < 2."""
    return np.swapaxes(x, -1, -2)


_LINALG_BEFORE_NUMPY_2 = {"matrix_transpose": matrix_transpose}


def build_linalg() -> EmulatedModule:
    values: dict[str, Any] = {"annotations": __future__.annotations, "LinAlgError": np.linalg.LinAlgError}
    for name in snapshot().modules["cupy.linalg"] - values.keys():
        # numpy < 2 keeps matmul and cross at the top only, and has no matrix_transpose
        fn = getattr(np.linalg, name, None) or _LINALG_BEFORE_NUMPY_2.get(name) or getattr(np, name)
        values[name] = device_function(fn, name, "cupy.linalg")
    return EmulatedModule("cupy.linalg", values)


_SINGLE = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.complex64))


def _fft_function(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """numpy's transform in CuPy's precision: cuFFT keeps single precision single, numpy computes double."""
    parameters = parameters_of(f"cupy.fft.{name}")

    def transform(a: Any, *args: Any, **kwargs: Any) -> Any:
        if parameters is not None:
            parameters.check((a, *args), kwargs)
        result = fn(unwrap(a), *map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()})
        if type(a) is ndarray and a.dtype in _SINGLE:
            result = result.astype(np.complex64 if result.dtype.kind == "c" else np.float32)
        return to_device(result)

    transform.__name__ = transform.__qualname__ = name
    if parameters is not None:
        transform.__signature__ = parameters.signature()  # type: ignore[attr-defined]
    return transform


def build_fft() -> EmulatedModule:
    values: dict[str, Any] = {"config": UnemulatedModule("cupy.fft.config", why="it configures cuFFT plans")}
    for name in snapshot().modules["cupy.fft"] - values.keys():
        fn = getattr(np.fft, name)
        values[name] = (device_function(fn, name, "cupy.fft") if name.endswith(("freq", "shift"))
                        else _fft_function(fn, name))
    return EmulatedModule("cupy.fft", values)


def build_lib() -> EmulatedModule:
    stride_tricks = EmulatedModule("cupy.lib.stride_tricks", {
        "as_strided": device_function(np.lib.stride_tricks.as_strided, "as_strided", "cupy.lib.stride_tricks"),
        "sliding_window_view": device_function(np.lib.stride_tricks.sliding_window_view, "sliding_window_view",
                                               "cupy.lib.stride_tricks"),
        # CuPy's module leaks these imports into its names
        "np": np, "annotations": __future__.annotations})
    return EmulatedModule("cupy.lib", {"stride_tricks": stride_tricks})


def build_exceptions() -> EmulatedModule:
    values: dict[str, Any] = {"annotations": __future__.annotations, "numpy": np}
    for name in snapshot().modules["cupy.exceptions"] - values.keys():
        values[name] = getattr(np.exceptions, name, None) or getattr(np, name)
    return EmulatedModule("cupy.exceptions", values)


def build_typing() -> EmulatedModule:
    return EmulatedModule("cupy.typing", {name: getattr(numpy.typing, name)
                                          for name in snapshot().modules["cupy.typing"]})
