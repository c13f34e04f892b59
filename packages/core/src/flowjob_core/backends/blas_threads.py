"""How many threads BLAS may use, set per region of a step (through ``threadpoolctl``).

BLAS's thread count is one number for the whole process. A step that runs nodes side by side on
the host threads, or splits one kernel over them, must drop BLAS to one thread there, or BLAS's
threads and the host threads together ask for more cores than the setting
(``FLOWJOB_HOST_THREADS``) allows; a chain of nodes on the step's own thread gives BLAS all of them, unless
the plan holds BLAS to one thread throughout (``chain``: a plan of convolutions and pooling, whose kernels
cut their own work over the host threads, see ``OpDef.compute.host_split``).

threadpoolctl finds the BLAS libraries loaded in the process (numpy's OpenBLAS, MKL, BLIS) once;
switching then costs a C call per library.
"""
from __future__ import annotations

import threading
from typing import Any

from threadpoolctl import ThreadpoolController


class BlasThreads:
    """The process's BLAS thread count, held at ``threads`` outside the regions that ask for fewer."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.chain = threads  # BLAS's threads on a chain of the plan now running: ``threads`` or 1
        self._lock = threading.Lock()
        self._libraries: list[Any] | None = None
        self._now: int | None = None
        self._narrowed = 0  # regions running with one BLAS thread, nested or on several threads

    def _found(self) -> list[Any]:
        if self._libraries is None:
            self._libraries = ThreadpoolController().select(user_api="blas").lib_controllers
        return self._libraries

    def _set(self, count: int) -> None:
        # set every time, even to the count this object set last: another session's may have changed it since
        for library in self._found():
            library.set_num_threads(count)
        self._now = count

    def widen(self) -> None:
        """BLAS on ``chain`` threads (a chain on the step's thread), unless a narrowed region is running."""
        with self._lock:
            if not self._narrowed:
                self._set(self.chain)

    def hold(self, wide: bool) -> None:
        """A plan's choice for its chains: BLAS on every thread (``wide``) or on one; set now if it changes."""
        chain = self.threads if wide else 1
        if chain != self.chain:
            self.chain = chain
            self.widen()

    def narrow(self) -> None:
        """Enter a region running several host threads at once: BLAS on one thread each."""
        with self._lock:
            self._narrowed += 1
            self._set(1)

    def release(self) -> None:
        """Leave a region entered with ``narrow``; the last one out gives BLAS its threads back."""
        with self._lock:
            self._narrowed -= 1
            if not self._narrowed:
                self._set(self.chain)

    @property
    def current(self) -> int | None:
        """The count last set (None: not set yet)."""
        return self._now

    def describe(self) -> list[tuple[str, str, int]]:
        """(library, its threading layer or API, threads it now uses) for each BLAS library found."""
        return [(lib.internal_api, lib.filepath, lib.get_num_threads()) for lib in self._found()]
