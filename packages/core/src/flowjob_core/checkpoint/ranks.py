"""Checkpoints in a world of several processes (a ``flowjob_world`` plugin such as flowjob-mpi):
rank 0 alone reads and writes the files, every rank raises what rank 0 raised, and after a load
every rank takes rank 0's variables. Variables split over the ranks are the exception: each rank writes and
reads its own rows of their files (``split_files``), after ``check_layouts`` found the ranks agree on them."""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from flowjob_core.errors import CheckpointError
from flowjob_core.ir.layout import Shard
from flowjob_core.runtime import variable_shards
from flowjob_core.runtime.session import Session
from flowjob_core.runtime.world import World, world_of

_ranks = threading.local()


def inside_rank_0() -> bool:
    """Whether this is rank 0 running a checkpoint call for every rank (``on_ranks``)."""
    return bool(getattr(_ranks, "inside", False))


def note_split_files(folder: str, present: list[str]) -> None:
    """Rank 0's load: the folder it read and the split variables it found there (each rank then reads its rows)."""
    _ranks.found = (folder, present)


def _describe(held: Any) -> str:
    if held is None:
        return "not split (held whole, or no such variable)"
    shape, dtype, axis, start, stop = held
    return f"S({axis}) rows [{start}, {stop}) of {tuple(shape)} {dtype}"


def check_layouts(session: Session, world: World) -> dict[str, list[Shard]]:
    """Every split variable's piece on each rank (in rank order), by name, after one all-gather (a collective):
    the same answer on every rank. Ranks that disagree on a variable (one holds it split, another whole or not at
    all; another shape, dtype or axis; pieces that overlap or leave rows out) are a ``CheckpointError`` naming the
    variable and what each rank holds, raised on every rank alike, before any file is touched."""
    store = session.variables
    mine = {}
    for name in variable_shards.split_names(session):
        var = store[name]
        assert var.shard is not None
        mine[name] = (tuple(int(d) for d in var.spec.shape), str(var.spec.dtype), var.shard.axis, var.shard.start,
                      var.shard.stop)
    everyone: list[dict[str, Any]] = world.allgather(mine) if world.size > 1 else [mine]
    split: dict[str, list[Shard]] = {}
    for name in sorted(set().union(*everyone)):
        held = [ranks.get(name) for ranks in everyone]
        found = [h for h in held if h is not None]
        shapes = {h[:3] for h in found}
        pieces = sorted((h[3], h[4]) for h in found)
        shape, _dtype, axis = found[0][:3]
        covered = len(found) == len(held) and len(shapes) == 1 and pieces[0][0] == 0 \
            and all(a[1] == b[0] for a, b in zip(pieces, pieces[1:])) and pieces[-1][1] == shape[axis]
        if not covered:
            each = "; ".join(f"rank {r}: {_describe(h)}" for r, h in enumerate(held))
            raise CheckpointError(f"variable {name!r}: the ranks hold it with different layouts ({each}); every rank "
                                  f"must declare it with the same distribute, and hold its own rows")
        split[name] = [Shard(h[2], h[3], h[4]) for h in found]
    return split


def on_ranks(session: Session, again: Callable[[], Any], prepare: Callable[[Session], None], *,
             broadcast: bool, pieces: Callable[[Any], None] | None = None) -> bool:
    """In a world of several ranks, run ``again`` (the calling function, same arguments) the way a
    checkpoint is kept there and answer True: rank 0 alone reads and writes the files (a checkpoint is
    written once, through the same atomic replace), every rank raises what rank 0 raised, and with
    ``broadcast`` every rank then takes rank 0's variables, so they start bitwise equal (``prepare``
    first plans every job on every rank, so every variable exists, and ``check_layouts`` checks the ranks agree
    on the split ones). Variables split over the ranks (``flowjob_core.runtime.variable_shards``) are set by
    ``pieces`` on each rank after an init or a load, given what rank 0 noted (``note_split_files``; None after an
    init). In one process, or inside that run, answer False: the caller goes on as usual."""
    world = world_of(session)
    if world.size == 1 or inside_rank_0():
        return False
    if broadcast:
        prepare(session)  # every rank plans every job (rank 0 again inside: planning is done once)
        check_layouts(session, world)

    def run() -> Any:
        _ranks.inside, _ranks.found = True, None
        try:
            again()
            return _ranks.found
        finally:
            _ranks.inside, _ranks.found = False, None

    found = world.root_only(run)
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
            pieces(found)
    return True
