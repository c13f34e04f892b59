"""The numpy backend (device tag ``cpu``), registered like any plugin's backend.

Allocator tuning is an explicit opt-in (``FLOWJOB_MALLOC_TUNING=1``, or calling
``tune_malloc(True)``), because it changes the C allocator of the whole process: glibc's malloc
is told (through ctypes, ``mallopt``) to keep freed memory instead of returning it to the
system (``M_TRIM_THRESHOLD`` = 2**31 - 1), to grow the heap in 512 MiB steps (``M_TOP_PAD``)
and to serve blocks up to 1 GiB from the heap (``M_MMAP_THRESHOLD``). Without it every large
temporary (numpy's ufunc/BLAS scratch) is a fresh mmap that is page-faulted again on each
step; with it a training step is faster (see ``bench/README.md``), but memory the program
frees later stays with the process. A library must not decide that for its host program, so
the default leaves malloc alone. ``python -m oneflow info`` shows whether it is in effect.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any

import numpy as np

from flowjob_core.backends.host_threads import HostThreads, cpu_count
from flowjob_core.plugins.host import hookimpl
from flowjob_core.plugins.registry import Backend, BackendRegistry
from flowjob_core.switches import current


M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
_TOP_PAD = 512 << 20
_malloc_tuned: bool | None = None  # None: not tried yet; else whether mallopt succeeded


def malloc_tuned() -> bool:
    """Whether this process runs with the allocator tuning (``tune_malloc``) in effect."""
    return bool(_malloc_tuned)


def tune_malloc(requested: bool | None = None) -> bool:
    """Apply the allocator settings once per process, if asked; True if they are in effect.

    ``requested`` None follows ``FLOWJOB_MALLOC_TUNING`` (off by default); True applies them.
    Once applied they stay for the life of the process (glibc has no undo). A no-op (False)
    where the C library is not glibc.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if not (current().malloc_tuning if requested is None else requested):
        return False
    _malloc_tuned = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
            return False  # musl and others: no mallopt knobs to set
        mallopt = libc.mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        # mallopt returns 1 on success; setting the trim threshold also fixes the mmap
        # threshold's dynamic adjustment, so large blocks come from the (kept) heap
        ok = mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1
        ok = mallopt(M_TOP_PAD, _TOP_PAD) == 1 and ok
        # large blocks from the heap too (glibc caps this; older ones at 32 MiB)
        if mallopt(M_MMAP_THRESHOLD, 2**30) != 1:
            mallopt(M_MMAP_THRESHOLD, 32 << 20)
        _malloc_tuned = ok
    except (OSError, AttributeError):
        _malloc_tuned = False
    return _malloc_tuned


def make_backend() -> Backend:
    tune_malloc()
    host = HostThreads()
    return Backend(
        tag="cpu",
        name="numpy",
        xp=np,
        device_count=cpu_count,
        to_host=lambda a: a,
        from_host=lambda a: a,
        make_rng=lambda seed: np.random.default_rng(seed),
        description=f"numpy {np.__version__}",
        host_arrays=True,
        parallel=host.split,
        lanes=host,
    )


@hookimpl
def flowjob_add_backends(registry: BackendRegistry) -> None:
    registry.add(make_backend())


@hookimpl(trylast=True)
def flowjob_select_backend(device_tag: str, backends: BackendRegistry) -> Any:
    """Core's default: the backend of that tag, else the CPU (the session warns once)."""
    return backends.get(device_tag) or backends.get("cpu")
