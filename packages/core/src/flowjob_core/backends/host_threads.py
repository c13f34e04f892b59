"""The host's threads for one step (the numpy backend's ``parallel`` and its lanes).

One setting, ``FLOWJOB_HOST_THREADS`` (else a program's ``flow.config.compute_thread_pool_size``, else
``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS`` when set, else every CPU this process may run on, as
PyTorch counts), bounds everything one step runs
at once: independent nodes side by side (``lanes``, the planner's inter-op schedule), the parts of
one kernel (``split``: numpy's ufuncs and einsum run on one core and release the GIL), and BLAS's
own threads. BLAS gets all of them on a chain of nodes and one thread inside a split or beside
other lanes (``BlasThreads``), so runnable threads never outnumber the setting.

The pool is made on first use, never at import; steps run one at a time per session (the executor's
single worker), so the pool's threads serve one step at a time. A split asked for inside a lane runs
whole on that lane's thread: the other threads are running lanes, and a part queued behind a lane
that waits for this one would never start.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np

from flowjob_core.backends.blas_threads import BlasThreads
from flowjob_core.errors import ConfigError
from flowjob_core.switches import current

Body = Callable[[int, int], None]


class LaneAborted(Exception):
    """Raised in a lane waiting for a node of a lane that failed; the failure itself is what the step raises."""


def cpu_count() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def host_thread_count(program: int | None = None) -> int:
    """Threads one step may keep busy: ``FLOWJOB_HOST_THREADS`` if set (the person running the program has the
    last word); else the count the program asked for (``program``: legacy ``compute_thread_pool_size``); else
    the count the environment asks BLAS for (``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, so MPI ranks given
    one thread each keep to one); else the CPUs available."""
    asked = current().host_threads
    if asked:
        return asked
    if program:
        return program
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        raw = os.environ.get(variable, "").strip()
        if raw:
            try:
                return max(1, int(raw.split(",")[0]))
            except ValueError:
                raise ConfigError(f"{variable}={raw!r}: expected a thread count") from None
    return max(1, cpu_count())


class HostThreads:
    """``split(body, count)`` runs ``body(start, stop)`` over contiguous parts of ``range(count)``,
    one per thread, the first part on the calling thread; ``lanes(bodies)`` runs the bodies at once,
    the first on the calling thread. The first exception raised is re-raised. The other threads run
    under the caller's numpy error state (``np.errstate`` is per thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._threads: int | None = None
        self._blas: BlasThreads | None = None
        self._local = threading.local()  # .busy: this thread runs a lane or a part
        self._program: int | None = None

    @property
    def threads(self) -> int:
        if self._threads is None:
            self._threads = host_thread_count(self._program)
        return self._threads

    def configure(self, program: int) -> None:
        """The thread count a program asked for (``flow.config.compute_thread_pool_size``), before any step ran
        (``FLOWJOB_HOST_THREADS`` still wins where set)."""
        if self._pool is not None or self._blas is not None:
            raise ConfigError("the host threads are in use: their count is set before the session's first step")
        self._program, self._threads = program, None

    @property
    def blas(self) -> BlasThreads:
        """BLAS's thread count, given all ``threads`` the first time it is asked for."""
        if self._blas is None:
            blas = BlasThreads(self.threads)
            blas.widen()
            self._blas = blas
        return self._blas

    def apply(self, blas_wide: bool = True) -> None:
        """Give BLAS the thread count a plan's chains use, now (a plan is built, or its step starts): the
        setting's (``blas_wide``), or one where the plan's kernels cut their own work over the host threads. A
        step that never splits or runs lanes (one thread) still keeps BLAS to it."""
        blas = self.blas
        blas.hold(blas_wide)
        blas.widen()

    @property
    def blas_wide(self) -> bool:
        """Whether BLAS gets every thread on a chain of the plan being built or run (else one: large products are
        then cut over the host threads, ``host_gemm``)."""
        return self.blas.chain > 1 or self.threads == 1

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads - 1, thread_name_prefix="flowjob-host")
            return self._pool

    def _run_at_once(self, calls: Sequence[Callable[[], None]]) -> list[BaseException | None]:
        """Run ``calls`` at once, the first here; their errors (None where one returned), in order."""
        errors_as = np.geterr()
        local = self._local

        def marked(call: Callable[[], None]) -> None:
            local.busy = True
            try:
                with np.errstate(**errors_as):
                    call()
            finally:
                local.busy = False

        futures: list[Future[None]] = []
        threads: list[tuple[threading.Thread, list[BaseException]]] = []
        pool = self._executor()
        self.blas.narrow()  # before any other thread starts: BLAS never runs wide beside them
        for call in calls[1:]:
            try:
                futures.append(pool.submit(marked, call))
            except RuntimeError:
                # the interpreter is exiting (steps launched with async_get finish in an exit handler, after
                # concurrent.futures stopped taking work): a plain thread, since lanes may wait for each other
                caught: list[BaseException] = []
                thread = threading.Thread(target=_catching, args=(marked, call, caught), daemon=True)
                thread.start()
                threads.append((thread, caught))
        first: BaseException | None = None
        try:
            marked(calls[0])
        except BaseException as exc:  # handed back with the others' once every call has stopped
            first = exc
        finally:
            errors = [first] + [f.exception() for f in futures]
            for thread, caught in threads:
                thread.join()
                errors.append(caught[0] if caught else None)
            self.blas.release()
        return errors

    def split(self, body: Body, count: int) -> None:
        parts = min(self.threads, count)
        if parts <= 1 or getattr(self._local, "busy", False):
            body(0, count)
            return
        bounds = [count * i // parts for i in range(parts + 1)]
        calls = [(lambda a=bounds[i], b=bounds[i + 1]: body(a, b)) for i in range(parts)]
        for error in self._run_at_once(calls):
            if error is not None:
                raise error

    def lanes(self, bodies: Sequence[Callable[[], None]], abort: Callable[[], None]) -> None:
        """Run ``bodies`` at once (at most ``threads`` of them), the first on the calling thread. A body
        that fails calls ``abort`` (which makes bodies waiting for it raise ``LaneAborted``); the first
        failure that is not such an abort is raised once every body has stopped."""
        def guarded(body: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                try:
                    body()
                except BaseException:
                    abort()
                    raise
            return run

        errors = self._run_at_once([guarded(b) for b in bodies])
        real = [e for e in errors if e is not None and not isinstance(e, LaneAborted)]
        if real:
            raise real[0]


def _catching(marked: Callable[[Callable[[], None]], None], call: Callable[[], None],
              caught: list[BaseException]) -> None:
    try:
        marked(call)
    except BaseException as exc:
        caught.append(exc)
