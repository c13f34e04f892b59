"""The MPI world of this process: its size, rank and host count, read once.

mpi4py is imported (which initializes MPI) only when the process was started by an MPI
launcher, so a plain ``python script.py`` stays a world of one without touching MPI.
"""
from __future__ import annotations

import faulthandler
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

from flowjob_mpi import faults, nccl
from flowjob_mpi.errors import MpiError
from flowjob_mpi.faults import WAITING

T = TypeVar("T")

# set by MPICH's hydra (PMI_*), Open MPI (OMPI_*) and PMIx launchers for every rank they start
LAUNCHER_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
LAUNCH_HINT = "python -m oneflow launch -n N script.py (or mpiexec -n N python script.py)"


@dataclass
class World:
    """``size`` ranks on ``hosts`` machines; this process is ``rank``. ``comm`` is mpi4py's
    ``COMM_WORLD`` (None in a world of one)."""

    size: int = 1
    rank: int = 0
    hosts: int = 1
    comm: Any = None
    host: int = 0  # this rank's host, numbered in the order the hosts' first ranks come
    rank_hosts: tuple[int, ...] = (0,)  # every rank's host, so numbered (the placements' machines: placements.py)
    nccl: Any = field(default=None, repr=False)  # the NCCL communicator of GPU ranks (nccl.Nccl), else None
    _root_depth: int = field(default=0, repr=False)

    @property
    def machines(self) -> int:
        """What ``flow.env.machine`` and ``flow.config.machine_num`` must name: the hosts, or the
        ranks when every rank runs on one host (a world simulating several machines)."""
        return self.hosts if self.hosts > 1 else self.size

    @property
    def machine_id(self) -> int:
        """What ``flow.current_machine_id()`` answers: the host's number, or the rank when ranks stand for machines."""
        return self.host if self.hosts > 1 else self.rank

    def root_only(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on rank 0 only; every rank returns its result or raises its exception.

        Nested calls on rank 0 run directly (a checkpoint manager's save calls the save it wraps).
        """
        if self.size == 1 or self._root_depth:
            return fn()
        outcome: tuple[bool, Any] = (True, None)
        if self.rank == 0:
            self._root_depth += 1
            try:
                outcome = (True, fn())
            except Exception as exc:  # every rank raises it, so none waits for a collective the others left
                outcome = (False, exc)
            finally:
                self._root_depth -= 1
        WAITING.enter("rank 0's checkpoint call")
        ok, value = self.comm.bcast(outcome, root=0)
        WAITING.leave()
        if not ok:
            if self.rank == 0:
                raise value
            raise value from None
        return value

    def broadcast_arrays(self, arrays: list[np.ndarray]) -> None:
        """Each array overwritten in place by rank 0's (contiguous host arrays, same order on every rank)."""
        if self.size == 1:
            return
        if self.nccl is not None:
            self.nccl.broadcast(arrays)
            return
        WAITING.enter("the broadcast of rank 0's variables")
        for array in arrays:
            self.comm.Bcast(array, root=0)
        WAITING.leave()

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` in rank order, on every rank (pickled: for results, not for every gradient)."""
        if self.size == 1:
            return [value]
        WAITING.enter("the all-gather of the mirrored results")
        gathered: list[Any] = self.comm.allgather(value)
        WAITING.leave()
        return gathered

    def gather_to_root(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` in rank order on rank 0, None on the others (pickled: a checkpoint's pieces of
        a split variable, so only the writing rank holds the whole)."""
        if self.size == 1:
            return [value]
        WAITING.enter("the gather of a split variable's pieces")
        gathered: list[Any] | None = self.comm.gather(value, root=0)
        WAITING.leave()
        return gathered

    def scatter_from_root(self, values: list[Any] | None) -> Any:
        """Rank 0's ``values[r]`` on each rank ``r`` (pickled: a checkpoint's rows of a split variable, for ranks that
        do not see its file)."""
        if self.size == 1:
            return values[0] if values else None
        WAITING.enter("the scatter of a split variable's rows")
        value = self.comm.scatter(values, root=0)
        WAITING.leave()
        return value


_lock = threading.Lock()
_world: World | None = None


def launched() -> bool:
    """Whether an MPI launcher started this process."""
    return any(os.environ.get(name) for name in LAUNCHER_VARIABLES)


def world() -> World:
    """This process's world, read once: MPI is initialized here, on every rank at the same point
    (the first session's plugin load), because the host count is one collective call."""
    global _world
    with _lock:
        if _world is None:
            _world = _read_world()
        return _world


JOIN_TIMEOUT_S = 25.0  # a rank that ended before starting MPI never joins: the others must not wait forever


def _read_world() -> World:
    if not launched():
        return World()
    # MPI_Init holds the interpreter lock while it waits for the other ranks, so no Python thread can time
    # it out: faulthandler's C watchdog ends the process (status 1, with this function in the traceback)
    faulthandler.dump_traceback_later(JOIN_TIMEOUT_S, exit=True)
    try:
        return _join_the_other_ranks_or_exit_after_the_timeout()
    finally:
        faulthandler.cancel_dump_traceback_later()


def _join_the_other_ranks_or_exit_after_the_timeout() -> World:
    try:
        from mpi4py import MPI
    except ImportError as exc:  # started by mpiexec, but this interpreter cannot talk MPI
        raise MpiError(f"this process was started by an MPI launcher but mpi4py cannot be imported ({exc}); "
                       f"pip install \"flowjob[mpi]\"") from exc
    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    names = comm.allgather(MPI.Get_processor_name()) if size > 1 else [""]
    order = list(dict.fromkeys(names))  # hosts in the order of their first rank: rank 0's machine is 0
    result = World(size, rank, len(order), comm if size > 1 else None, order.index(names[rank]),
                   rank_hosts=tuple(order.index(name) for name in names))
    if size > 1:
        faults.install(result)
        result.nccl = nccl.setup(result)  # after faults: a rank failing here stops the others
    return result
