"""What the emulated ``cupyx`` holds (``build()`` makes it; ``factory.emulated_cupyx()`` gives the process's
one): the scatter functions, ``rsqrt``, pinned host buffers (plain numpy
arrays here), the synchronization guards (nothing to guard) and ``errstate``; its submodules refuse."""
from __future__ import annotations

import __future__
import contextlib
from typing import Any, Iterator

import numpy as np

from flowjob_gpu.emulation.array import ndarray
from flowjob_gpu.emulation.functions import device_function
from flowjob_gpu.emulation.modules import EmulatedModule
from flowjob_gpu.emulation.unemulated import Unemulated, UnemulatedModule

WHY_NOT_USED = "the emulation leaves it out (no flowjob kernel uses it)"


class DeviceSynchronized(RuntimeError):
    """Raised by CuPy inside ``allow_synchronize(False)`` when the device is synchronized."""


@contextlib.contextmanager
def allow_synchronize(allow: bool) -> Iterator[None]:
    yield  # the emulated device never waits


# CuPy's error handling: only linalg's is acted on (by cupyx.linalg, not emulated); the others are
# numpy's, which CuPy accepts and ignores
_errstate: dict[str, str | None] = {"divide": None, "over": None, "under": None, "invalid": None,
                                    "linalg": "ignore"}


def geterr() -> dict[str, str | None]:
    return dict(_errstate)


def seterr(*, divide: str | None = None, over: str | None = None, under: str | None = None,
           invalid: str | None = None, linalg: str | None = None) -> dict[str, str | None]:
    before = geterr()
    if linalg is not None and linalg not in ("ignore", "raise"):
        raise NotImplementedError(f"linalg={linalg!r} is not supported")
    given = {"divide": divide, "over": over, "under": under, "invalid": invalid, "linalg": linalg}
    _errstate.update({key: value for key, value in given.items() if value is not None})
    return before


@contextlib.contextmanager
def errstate(*, divide: str | None = None, over: str | None = None, under: str | None = None,
             invalid: str | None = None, linalg: str | None = None) -> Iterator[None]:
    before = seterr(divide=divide, over=over, under=under, invalid=invalid, linalg=linalg)
    try:
        yield
    finally:
        _errstate.update(before)


def _scatter(method: str) -> Any:
    def scatter(a: ndarray, slices: Any, value: Any) -> None:
        if type(a) is not ndarray:
            raise TypeError(f"cupyx.{method}: the operand must be a cupy.ndarray, not {type(a)}")
        getattr(a, method)(slices, value)

    scatter.__name__ = scatter.__qualname__ = method
    return scatter


def _rsqrt(x: Any, out: Any = None) -> Any:
    return np.divide(1, np.sqrt(x), out=out)


def empty_pinned(shape: Any, dtype: Any = float, order: str = "C") -> np.ndarray:
    return np.empty(shape, dtype, order)


def zeros_pinned(shape: Any, dtype: Any = float, order: str = "C") -> np.ndarray:
    return np.zeros(shape, dtype, order)


def empty_like_pinned(a: np.ndarray, dtype: Any = None, order: str = "K", subok: Any = None,
                      shape: Any = None) -> np.ndarray:
    return np.empty_like(a, dtype, order, shape=shape)


def zeros_like_pinned(a: np.ndarray, dtype: Any = None, order: str = "K", subok: Any = None,
                      shape: Any = None) -> np.ndarray:
    return np.zeros_like(a, dtype, order, shape=shape)


def build() -> EmulatedModule:
    """The emulated ``cupyx``."""
    return EmulatedModule("cupyx", {
        "scatter_add": _scatter("scatter_add"), "scatter_max": _scatter("scatter_max"),
        "scatter_min": _scatter("scatter_min"), "rsqrt": device_function(_rsqrt, "rsqrt"),
        "empty_pinned": empty_pinned, "zeros_pinned": zeros_pinned, "empty_like_pinned": empty_like_pinned,
        "zeros_like_pinned": zeros_like_pinned, "allow_synchronize": allow_synchronize,
        "DeviceSynchronized": DeviceSynchronized, "errstate": errstate, "geterr": geterr, "seterr": seterr,
        "GeneralizedUFunc": Unemulated("cupyx.GeneralizedUFunc", WHY_NOT_USED),
        "get_runtime_info": Unemulated("cupyx.get_runtime_info", "it reports the CUDA installation"),
        **{name: UnemulatedModule(f"cupyx.{name}", why=WHY_NOT_USED)
           for name in ("linalg", "optimizing", "profiler", "scipy", "time")},
        "annotations": __future__.annotations,
    }, "flowjob's emulated cupyx")

