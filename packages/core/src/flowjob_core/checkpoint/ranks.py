"""Checkpoints in a world of several processes (a ``flowjob_world`` plugin such as flowjob-mpi):
rank 0 alone reads and writes the files, every rank raises what rank 0 raised, and after a load
every rank takes rank 0's variables."""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from flowjob_core.runtime.session import Session
from flowjob_core.runtime.world import world_of

_ranks = threading.local()


def on_ranks(session: Session, again: Callable[[], Any], prepare: Callable[[Session], None], *,
             broadcast: bool) -> bool:
    """In a world of several ranks, run ``again`` (the calling function, same arguments) the way a
    checkpoint is kept there and answer True: rank 0 alone reads and writes the files (a checkpoint is
    written once, through the same atomic replace), every rank raises what rank 0 raised, and with
    ``broadcast`` every rank then takes rank 0's variables, so they start bitwise equal (``prepare``
    first plans every job on every rank, so every variable exists). In one process, or inside that run,
    answer False: the caller goes on as usual."""
    world = world_of(session)
    if world.size == 1 or getattr(_ranks, "inside", False):
        return False
    if broadcast:
        prepare(session)  # every rank plans every job (rank 0 again inside: planning is done once)

    def run() -> Any:
        _ranks.inside = True
        try:
            return again()
        finally:
            _ranks.inside = False

    world.root_only(run)
    if broadcast:
        store = session.variables
        names = sorted(store.names())
        with session.between_steps():
            arrays = [np.ascontiguousarray(store.get(name)) for name in names]
        world.broadcast_arrays(arrays)
        with session.between_steps():
            for name, array in zip(names, arrays):
                store.assign(name, array)
    return True
