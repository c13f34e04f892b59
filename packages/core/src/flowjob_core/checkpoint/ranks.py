"""Checkpoints in a world of several processes (a ``flowjob_world`` plugin such as flowjob-mpi):
rank 0 alone reads and writes the files, every rank raises what rank 0 raised, and after a load
every rank takes rank 0's variables."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import numpy as np

from flowjob_core.runtime import variable_shards
from flowjob_core.runtime.session import Session
from flowjob_core.runtime.world import world_of

_ranks = threading.local()


def gathered_wholes() -> dict[str, Any]:
    """The whole values of the split variables gathered for the save rank 0 is running (empty elsewhere)."""
    return getattr(_ranks, "wholes", {})


@contextlib.contextmanager
def split_variables_gathered(session: Session, enabled: bool = True) -> Iterator[None]:
    """Around a save that rank 0 alone runs (``World.root_only``): every rank sends rank 0 its pieces of the
    variables split over the ranks first (a collective), so rank 0 writes them whole and the others never hold
    them (``flowjob_core.runtime.variable_shards``). Nested (a manager's save around the save): gathered once."""
    before, outer = getattr(_ranks, "wholes", {}), getattr(_ranks, "gathered", False)
    world = world_of(session)
    if enabled and not outer and world.size > 1 and variable_shards.split_names(session):
        _ranks.wholes, _ranks.gathered = variable_shards.gather_whole(session, world), True
    try:
        yield
    finally:
        _ranks.wholes, _ranks.gathered = before, outer


def on_ranks(session: Session, again: Callable[[], Any], prepare: Callable[[Session], None], *,
             broadcast: bool, pieces: Callable[[], None] | None = None) -> bool:
    """In a world of several ranks, run ``again`` (the calling function, same arguments) the way a
    checkpoint is kept there and answer True: rank 0 alone reads and writes the files (a checkpoint is
    written once, through the same atomic replace), every rank raises what rank 0 raised, and with
    ``broadcast`` every rank then takes rank 0's variables, so they start bitwise equal (``prepare``
    first plans every job on every rank, so every variable exists). Variables split over the ranks
    (``flowjob_core.runtime.variable_shards``) are gathered for a save, and set by ``pieces`` on each rank
    after an init or a load. In one process, or inside that run, answer False: the caller goes on as usual."""
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

    with split_variables_gathered(session, enabled=not broadcast):  # rank 0's save writes them whole
        world.root_only(run)
    if broadcast:
        store = session.variables
        names = sorted(name for name in store.names() if store[name].shard is None)
        with session.between_steps():
            arrays = [np.ascontiguousarray(store.get(name)) for name in names]
        world.broadcast_arrays(arrays)
        with session.between_steps():
            for name, array in zip(names, arrays):
                store.assign(name, array)
        if pieces is not None:
            pieces()
    return True
