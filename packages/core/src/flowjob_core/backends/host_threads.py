"""Splitting a kernel's elementwise work over the host's cores (the numpy backend's ``parallel``).

numpy's ufuncs and einsum run on one core, while BLAS uses all of them; on a two-core machine a
batch-norm or relu pass over a large activation leaves a core idle. numpy releases the GIL inside
those loops, so running the halves of one pass on two threads takes about half the time (the
passes are memory-bound; past a few threads the memory bus is the limit, hence the cap).

The pool is made on the first split, never at import; steps run one at a time per session (the
executor's single worker), so the pool's threads only ever serve one kernel at a time.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np

from flowjob_core.errors import ConfigError
from flowjob_core.switches import current

MAX_AUTO_THREADS = 4  # memory-bound passes stop scaling here
Body = Callable[[int, int], None]


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def host_thread_count() -> int:
    """How many threads a split uses: ``FLOWJOB_HOST_THREADS`` if set; else the BLAS thread count the
    environment asks for (``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, so MPI ranks given one
    thread each keep to one); else the CPUs available, at most four."""
    asked = current().host_threads
    if asked:
        return asked
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        raw = os.environ.get(variable, "").strip()
        if raw:
            try:
                return max(1, int(raw.split(",")[0]))
            except ValueError:
                raise ConfigError(f"{variable}={raw!r}: expected a thread count") from None
    return max(1, min(_cpu_count(), MAX_AUTO_THREADS))


class HostThreads:
    """``split(body, count)`` runs ``body(start, stop)`` over contiguous parts of ``range(count)``,
    one per thread, the first part on the calling thread; the first exception raised is re-raised.
    The other threads run under the caller's numpy error state (``np.errstate`` is per thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._threads: int | None = None

    @property
    def threads(self) -> int:
        if self._threads is None:
            self._threads = host_thread_count()
        return self._threads

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads - 1, thread_name_prefix="flowjob-host")
            return self._pool

    def split(self, body: Body, count: int) -> None:
        parts = min(self.threads, count)
        if parts <= 1:
            body(0, count)
            return
        bounds = [count * i // parts for i in range(parts + 1)]
        pool = self._executor()
        errors_as = np.geterr()

        def under_callers_errstate(start: int, stop: int) -> None:
            with np.errstate(**errors_as):
                body(start, stop)

        futures: list[Future[None]] = []
        here = [(bounds[0], bounds[1])]  # the parts run on the calling thread
        for i in range(1, parts):
            try:
                futures.append(pool.submit(under_callers_errstate, bounds[i], bounds[i + 1]))
            except RuntimeError:
                # the interpreter is exiting (steps launched with async_get finish in an exit handler,
                # after concurrent.futures stopped taking work): the rest runs here
                here.append((bounds[i], bounds[parts]))
                break
        try:
            for start, stop in here:
                body(start, stop)
        finally:
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error
