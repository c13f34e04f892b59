"""Variables split over ranks (``StoredVariable.shard``): each rank holds its piece, initialized as its piece of the
whole value one process draws (``VariableStore.initial_piece``), so a seed gives the same model at any rank count.

Checkpoints keep legacy's layout, the whole variable in ``<name>/out``, whatever the rank count: each rank writes
and reads its own rows of the file (``flowjob_core.checkpoint.split_files``), so a checkpoint saved on N ranks loads
in one process or on M ranks. The collectives here move pieces where a rank must see more than its own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from flowjob_core.runtime.session import Session
    from flowjob_core.runtime.world import World


def split_names(session: "Session") -> list[str]:
    """The session's variables held as pieces, in name order (the order every rank goes through them)."""
    store = session.variables
    return sorted(name for name in store.names() if store[name].shard is not None)


def gather_to_root(world: "World", piece: Any) -> list[Any] | None:
    """Every rank's ``piece`` in rank order on rank 0, None on the others (a collective)."""
    gather = getattr(world, "gather_to_root", None)  # optional in a world plugin: else every rank gathers
    if gather is None:
        gathered = world.allgather(piece)
        return gathered if world.rank == 0 else None
    result: list[Any] | None = gather(piece)
    return result


def scatter_from_root(world: "World", pieces: list[Any] | None) -> Any:
    """Rank 0's ``pieces[r]`` on each rank ``r`` (``pieces`` is read on rank 0 only; a collective)."""
    scatter = getattr(world, "scatter_from_root", None)  # optional in a world plugin: else every rank gets them all
    if scatter is None:
        return world.allgather(pieces)[0][world.rank]
    return scatter(pieces)


def gather_one(session: "Session", world: "World", name: str) -> np.ndarray:
    """One split variable's whole value on every rank (a collective: every rank calls it at the same point)."""
    with session.between_steps():
        piece = session.variables.get(name)
    shard = session.variables[name].shard
    assert shard is not None, name
    return np.concatenate(world.allgather(piece), axis=shard.axis)


def initialize_pieces(session: "Session") -> None:
    """Each split variable set from its initializer: the whole drawn as one process draws it, this rank's piece kept."""
    for name in split_names(session):
        session.variables.initialize(name)
