"""``flow.distributed``: which process of the run this is (legacy v0.4's ``get_rank`` / ``get_world_size``),
and ``flow.current_machine_id``. The answers come from the session's world (``flowjob_core.runtime.world``, the
``flowjob_world`` hook): under ``mpiexec`` flowjob-mpi's MPI ranks, otherwise this one process (rank 0 of 1).
"""
from __future__ import annotations

from flowjob_core.runtime.session import get_default_session
from flowjob_core.runtime.world import World, world_of


def _world() -> World:
    return world_of(get_default_session())


def get_rank() -> int:
    """This process's rank, in ``[0, get_world_size())``; rank 0 is legacy's master."""
    return _world().rank


def get_world_size() -> int:
    """How many processes run the program (the MPI ranks; 1 without a launcher)."""
    return _world().size


def current_machine_id() -> int:
    """The id of the machine this process runs on, in ``[0, machines)``, numbered in rank order (the first
    rank's machine is 0, the master). Ranks stand for machines when all of them run on one host."""
    return _world().machine_id


__all__ = ["get_rank", "get_world_size"]
