"""The emulated ``cupy`` module: each of CuPy's names resolved to a hand-made emulation, numpy's object
(where CuPy's is numpy's), numpy's function or ufunc behind CuPy's name, or a refusal.

numpy's names that CuPy lacks are not there at all (``errstate``, ``nditer``, ``insert``, ``spacing``...).
"""
from __future__ import annotations

import __future__
from typing import Any

import numpy as np

from flowjob_gpu.emulation import cuda, functions, numpy_modules, random_numbers
from flowjob_gpu.emulation.array import device_op, flatiter, ndarray
from flowjob_gpu.emulation.modules import EmulatedModule
from flowjob_gpu.emulation.names import snapshot
from flowjob_gpu.emulation.unemulated import Unemulated, UnemulatedModule

WHY_NOT_USED = "the emulation leaves it out (no flowjob kernel uses it)"


def _in1d(ar1: Any, ar2: Any, assume_unique: bool = False, invert: bool = False) -> np.ndarray:
    return np.isin(np.ravel(ar1), ar2, assume_unique=assume_unique, invert=invert)


def _asfarray(a: Any, dtype: Any = np.float64) -> np.ndarray:
    return np.asarray(a, dtype=dtype if np.issubdtype(dtype, np.inexact) else np.float64)


def _msort(a: Any) -> np.ndarray:
    return np.sort(a, axis=0)


def _astype(x: Any, dtype: Any, /, *, copy: bool = True) -> np.ndarray:
    return x.astype(dtype, copy=copy)


_MISSING = object()
NUMPY_2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _first(*candidates: Any) -> Any:
    return next((c for c in candidates if c is not None), None)


# CuPy's names that numpy 2 dropped, or that numpy < 2 lacks: numpy's object of the other name
def _renamed() -> dict[str, Any]:
    lib = np.lib
    renamed = {
        "NaN": np.nan, "NAN": np.nan, "Inf": np.inf, "Infinity": np.inf, "infty": np.inf, "PINF": np.inf,
        "NINF": -np.inf, "PZERO": 0.0, "NZERO": -0.0,
        "float_": np.float64, "complex_": np.complex128, "cfloat": np.complex128, "singlecomplex": np.complex64,
        # numpy < 2 warns on reading these names (reserved for numpy 2's meaning), so they are not read there
        **({"bool": np.bool, "long": np.long, "ulong": np.ulong} if NUMPY_2 else
           {"bool": np.bool_, "long": np.int_, "ulong": np.uint}),
        "alltrue": np.all, "sometrue": np.any, "product": np.prod, "cumproduct": np.cumprod, "round_": np.round,
        "in1d": _in1d, "asfarray": _asfarray, "msort": _msort, "astype": _astype,
        "trapz": _first(getattr(np, "trapezoid", None), getattr(np, "trapz", None)),
        "trapezoid": _first(getattr(np, "trapezoid", None), getattr(np, "trapz", None)),
        "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
        "atan2": np.arctan2, "atanh": np.arctanh, "bitwise_invert": np.invert, "bitwise_left_shift": np.left_shift,
        "bitwise_right_shift": np.right_shift, "pow": np.power, "concat": np.concatenate,
        "permute_dims": np.transpose, "matrix_transpose": numpy_modules.matrix_transpose,
        "DataSource": _first(getattr(getattr(lib, "npyio", None), "DataSource", None), getattr(np, "DataSource", None)),
        "format_parser": np.rec.format_parser,
        "byte_bounds": _first(getattr(getattr(lib, "array_utils", None), "byte_bounds", None),
                              getattr(np, "byte_bounds", None)),
        **{name: getattr(np.exceptions, name) for name in ("AxisError", "ComplexWarning", "ModuleDeprecationWarning",
                                                           "TooHardError", "VisibleDeprecationWarning")},
        "RankWarning": _first(getattr(np.exceptions, "RankWarning", None), getattr(np, "RankWarning", None)),
    }
    return {name: value for name, value in renamed.items() if value is not None}


def _hand_made(cupy: Any) -> dict[str, Any]:
    """The names the emulation writes itself (``cupy`` is the module being built, for get_array_module)."""
    refusing = {name: Unemulated(f"cupy.{name}") for name in (
        "ElementwiseKernel", "RawKernel", "RawModule", "ReductionKernel", "fromDlpack", "from_dlpack")}
    left_out = {name: Unemulated(f"cupy.{name}", WHY_NOT_USED) for name in ("make_aligned_dtype", "poly1d")}
    return {
        **refusing, **left_out,
        "ndarray": ndarray, "ufunc": functions.ufunc, "flatiter": flatiter, "broadcast": functions.broadcast,
        "array": functions.array, "asarray": functions.asarray, "asanyarray": functions.asarray,
        "asnumpy": functions.asnumpy, "get_array_module": functions.get_array_module_of(cupy),
        "fuse": functions.fuse, "memoize": functions.memoize, "clear_memo": functions.clear_memo,
        "vectorize": functions.vectorize,
        "c_": functions.IndexTrick(np.c_), "r_": functions.IndexTrick(np.r_),
        "mgrid": functions.IndexTrick(np.mgrid), "ogrid": functions.IndexTrick(np.ogrid),
        "is_available": cuda.is_available, "show_config": show_config,
        "get_default_memory_pool": lambda: cuda.DEFAULT_MEMORY_POOL,
        "get_default_pinned_memory_pool": lambda: cuda.DEFAULT_PINNED_MEMORY_POOL,
        "disable_experimental_feature_warning": False, "annotations": __future__.annotations,
        "cuda": cuda.build(), "random": random_numbers.build(), "linalg": numpy_modules.build_linalg(),
        "fft": _recorded(numpy_modules.build_fft()), "lib": numpy_modules.build_lib(),
        "exceptions": numpy_modules.build_exceptions(), "typing": numpy_modules.build_typing(),
        "testing": UnemulatedModule("cupy.testing", snapshot().modules["cupy.testing"], WHY_NOT_USED),
        "polynomial": UnemulatedModule("cupy.polynomial", snapshot().modules["cupy.polynomial"], WHY_NOT_USED),
    }


def _recorded(module: EmulatedModule) -> EmulatedModule:
    """``module`` with its functions recorded during stream capture (fft's transforms call numpy directly)."""
    for name, value in list(vars(module).items()):
        if not name.startswith("_") and callable(value) and not isinstance(value, type):
            setattr(module, name, device_op(value))
    return module


def show_config(*, _full: bool = False) -> None:
    print(f"flowjob's emulated CuPy (the names of CuPy {snapshot().cupy_version}; numpy {np.__version__} behind "
          "them; one emulated device)")


def emulated(name: str, value: Any) -> Any:
    """numpy's ``value`` as the emulated CuPy's ``name``: ufuncs where CuPy's is one, functions wrapped (matmul
    among them: CuPy's is a generalized ufunc, not a ``cupy.ufunc``), the rest as it is."""
    if name in snapshot().ufuncs:  # numpy's ufunc, or numpy's function where CuPy has a ufunc (sinc, i0, fix)
        return functions.ufunc(value, name)
    if callable(value) and not isinstance(value, type):
        return functions.device_function(value, name)
    return value


def resolve(name: str, hand_made: dict[str, Any], renamed: dict[str, Any]) -> Any:
    """The emulated CuPy's value for ``name``; a refusal naming numpy where numpy (this version) lacks it."""
    if name in hand_made:
        return hand_made[name]
    value = renamed.get(name, _MISSING)  # before numpy's own: numpy 2.0 to 2.3 still has some, deprecated
    if value is _MISSING:
        value = getattr(np, name, _MISSING)
    if value is _MISSING:
        return Unemulated(f"cupy.{name}", f"numpy {np.__version__} has no such name to emulate it with")
    return value if name in snapshot().numpy_objects else emulated(name, value)


def build() -> EmulatedModule:
    """The emulated ``cupy`` module."""
    module = EmulatedModule.__new__(EmulatedModule)
    hand_made, renamed = _hand_made(module), _renamed()
    values = {name: resolve(name, hand_made, renamed) for name in snapshot().modules["cupy"]}
    values["__version__"] = f"{snapshot().cupy_version}+flowjob.emulated"
    module.__init__("cupy", values, "flowjob's emulated CuPy: CuPy's names, numpy behind them, one emulated device")
    return module


def fallbacks(module: Any) -> set[str]:
    """The names of the built ``module`` that refuse because numpy (this version) lacks them."""
    return {name for name in dir(module) if isinstance(getattr(module, name), Unemulated)
            and getattr(module, name).why.startswith("numpy ")}
