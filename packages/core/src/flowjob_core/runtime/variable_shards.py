"""Checkpoints of variables split over ranks (``StoredVariable.shard``): the files keep legacy's layout, the whole
variable in ``<name>/out``, whatever the rank count.

Saving gathers each split variable's pieces onto rank 0 alone (every rank takes part, in name order; rank 0 writes
the whole); loading reads each rank's own rows of the file; initializing draws only this rank's piece of the value
one process draws (``VariableStore.initial_piece``). So a checkpoint saved on N ranks loads in one process or on
M ranks.
"""
from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from flowjob_core.errors import CheckpointError

if TYPE_CHECKING:
    from flowjob_core.runtime.session import Session
    from flowjob_core.runtime.world import World


def split_names(session: "Session") -> list[str]:
    """The session's variables held as pieces, in name order (the order every rank goes through them)."""
    store = session.variables
    return sorted(name for name in store.names() if store[name].shard is not None)


def gather_whole(session: "Session", world: "World") -> dict[str, np.ndarray]:
    """Every split variable's whole value on rank 0, nothing on the others (a collective: every rank calls it at
    the same point), so only the rank that writes the checkpoint ever holds a whole split variable."""
    store = session.variables
    names = split_names(session)
    with session.between_steps():  # the pieces of one step
        pieces = {name: store.get(name) for name in names}
    wholes = {}
    for name in names:
        gathered = _gather_to_root(world, pieces.pop(name))
        if gathered is not None:
            wholes[name] = _joined(gathered, store[name].shard)
    return wholes


def _gather_to_root(world: "World", piece: np.ndarray) -> list[np.ndarray] | None:
    gather = getattr(world, "gather_to_root", None)  # optional in a world plugin: else every rank gathers
    if gather is None:
        gathered = world.allgather(piece)
        return gathered if world.rank == 0 else None
    result: list[np.ndarray] | None = gather(piece)
    return result


def gather_one(session: "Session", world: "World", name: str) -> np.ndarray:
    """One split variable's whole value (a collective, as ``gather_whole``)."""
    with session.between_steps():
        piece = session.variables.get(name)
    return _joined(world.allgather(piece), session.variables[name].shard)


def _joined(pieces: list[np.ndarray], shard: Any) -> np.ndarray:
    return np.concatenate(pieces, axis=shard.axis)


def initialize_pieces(session: "Session") -> None:
    """Each split variable set from its initializer: the whole drawn as one process draws it, this rank's piece kept."""
    for name in split_names(session):
        session.variables.initialize(name)


def load_pieces(session: "Session", folder: str, data_file: str, keep_missing: bool) -> None:
    """Each split variable set to this rank's rows of ``<folder>/<name>/<data_file>`` (the whole variable, checked
    by rank 0 already); a variable the checkpoint lacks is initialized, or with ``keep_missing`` kept."""
    store = session.variables
    reads: list[tuple[str, Callable[[], np.ndarray]]] = []
    for name in split_names(session):
        var = store[name]
        assert var.shard is not None
        index = var.shard.index()
        path = os.path.join(folder, *name.split("/"), data_file)
        if not os.path.isfile(path):
            if not keep_missing:
                reads.append((name, partial(_initial_piece, store, name, index)))
            continue
        if os.path.getsize(path) != var.spec.nbytes:
            raise CheckpointError(f"checkpoint {folder!r}, variable {name!r}: {path} has {os.path.getsize(path)} "
                                  f"bytes, expected {var.spec.nbytes} for {var.spec}")
        whole = np.memmap(path, dtype=var.spec.dtype, mode="r", shape=var.spec.shape)
        reads.append((name, partial(_rows, whole, index)))
    values = {name: read() for name, read in reads}  # every file read before the first is assigned
    with session.between_steps():
        for name, value in values.items():
            store.assign_local(name, value)


def _initial_piece(store: Any, name: str, index: tuple[slice, ...]) -> np.ndarray:
    return store.initial_piece(name)


def _rows(whole: np.ndarray, index: tuple[slice, ...]) -> np.ndarray:
    return np.array(whole[index])  # only this rank's rows are read from the file
