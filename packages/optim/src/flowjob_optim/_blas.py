"""``C = alpha op(A) op(B) + beta C`` in place, through the BLAS numpy itself links (ctypes, no copies).

numpy does not expose ``gemm`` with ``beta``; its wheels bundle OpenBLAS (``numpy.libs``) with
the CBLAS interface under a ``scipy_`` prefix and a ``64_`` (64-bit integer) suffix. Using that
library, not SciPy's separate copy, keeps one BLAS thread pool: two pools on a small machine
spin against each other. ``gemm(dtype)`` is None when the library or symbol is not found; the
callers then fall back to ``matmul`` and elementwise ops. Whether to use it at all is the caller's
switch (``FLOWJOB_BLAS_FUSION``, read by ``flowjob_optim.cpu`` when a job is planned).
"""
from __future__ import annotations

import ctypes
import glob
import os
from functools import lru_cache
from typing import Any, Callable

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# only the 64-bit-integer builds' names: their integer width is certain from the name
_CANDIDATES = (("scipy_cblas_{}gemm64_", ctypes.c_int64), ("cblas_{}gemm64_", ctypes.c_int64))


def _libraries() -> list[str]:
    root = os.path.dirname(os.path.dirname(np.__file__))
    found = glob.glob(os.path.join(root, "numpy.libs", "*openblas*.so*"))
    found += glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*"))
    return sorted(found)


@lru_cache(maxsize=None)
def _symbol(letter: str) -> tuple[Any, Any] | None:
    for path in _libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pattern, int_t in _CANDIDATES:
            fn = getattr(lib, pattern.format(letter), None)
            if fn is None:
                continue
            real = ctypes.c_float if letter == "s" else ctypes.c_double
            fn.restype = None
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, real, ctypes.c_void_p,
                           int_t, ctypes.c_void_p, int_t, real, ctypes.c_void_p, int_t]
            return fn, int_t
    return None


def _operand(x: Any, transposed: bool) -> tuple[Any, bool, int]:
    """(x, transposed, leading dimension) as BLAS reads x in place: a row-major matrix or block of one (its rows
    ``ld`` elements apart), or the transpose of one; anything else is copied first."""
    item = x.itemsize
    s0, s1 = x.strides
    rows, cols = x.shape
    if s1 == item and s0 % item == 0 and s0 // item >= max(cols, 1):
        return x, transposed, s0 // item if rows > 1 else max(cols, 1)
    if s0 == item and s1 % item == 0 and s1 // item >= max(rows, 1):
        return x, not transposed, s1 // item if cols > 1 else max(rows, 1)
    x = np.ascontiguousarray(x)
    return x, transposed, max(x.shape[1], 1)


def gemm(dtype: Any) -> Callable[[float, Any, Any, bool, bool, float, Any], None] | None:
    """``run(alpha, a, b, ta, tb, beta, c)``: ``c = alpha op(a) op(b) + beta c`` for C-ordered ``c``;
    None when numpy's BLAS cannot be reached for this dtype."""
    dtype = np.dtype(dtype)
    letter = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}.get(dtype)
    found = _symbol(letter) if letter else None
    if found is None:
        return None
    fn, _ = found
    cache: dict[int, tuple[Any, int]] = {}  # id -> (array, address): kernels see the same buffers every step

    def address(x: Any) -> int:
        hit = cache.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        ptr = x.ctypes.data
        if len(cache) > 16:
            cache.clear()
        cache[id(x)] = (x, ptr)  # holds x: its id cannot be reused while cached
        return ptr

    def run(alpha: float, a: Any, b: Any, ta: bool, tb: bool, beta: float, c: Any) -> None:
        # callers pass arrays of ``dtype`` (static specs); an F-ordered operand is its C-ordered
        # transpose at the same address, so only the flag and the leading dimension change
        if not c.flags.c_contiguous:
            raise ValueError("gemm: c must be C-ordered")
        m, n = c.shape
        k = a.shape[0] if ta else a.shape[1]
        a, ta, lda = _operand(a, ta)
        b, tb, ldb = _operand(b, tb)
        fn(_ROW_MAJOR, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, m, n, k, alpha,
           address(a), lda or 1, address(b), ldb or 1, beta, address(c), n or 1)

    return run
