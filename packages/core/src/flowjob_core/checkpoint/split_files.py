"""Checkpoints of variables split over the ranks (``StoredVariable.shard``): the files keep legacy's layout, the whole
variable in ``<name>/out``, and each rank writes and reads its own rows of it (``row_files``), so no rank ever holds
more of a split variable than its piece.

A save (every rank calls it at the same point, as every checkpoint call; ``check_layouts`` has found the ranks
agree on the split variables):

1. every rank copies its pieces, and rank 0 the variables held whole, between the same two steps;
2. rank 0 alone (``World.root_only``) checks the target, makes the hidden folder of the atomic save
   (``atomic_replace``), writes the variables held whole and every ``meta``, creates each split variable's ``out``
   at its full size, and a token file holding a random token;
3. each rank reads the token file: where every rank finds rank 0's token (one file system shared by the ranks),
   each writes its pieces at their byte offsets and fsyncs; where some do not (ranks on machines that do not share
   the folder), or with ``FLOWJOB_CHECKPOINT_SPLIT_SAVE=gather``, each split variable in turn is gathered onto
   rank 0 (``World.gather_to_root``), which writes each rank's piece at its place: rank 0 then holds one whole
   split variable at a time. An info line on the ``flowjob.checkpoint`` logger says which ran;
4. one all-gather of each rank's outcome: a rank that failed (a full disk, a write error) fails the save on every
   rank with a ``CheckpointError`` naming the ranks and their errors, and rank 0 removes the hidden folder; else rank
   0 removes the token, writes ``snapshot_done`` and renames the folder into place, as a save in one process does.

A rank killed meanwhile ends every rank (flowjob-mpi's faults): nothing was renamed into place, and the next save or
load beside it removes the hidden folder (its writer is gone).

A load: rank 0 checks every file (``save_load.load``), reads the variables held whole and notes the split ones it
found; each rank then reads its rows of those (``load_pieces``). Where some rank does not see them, rank 0 reads
each rank's rows and sends them (``World.scatter_from_root``).
"""
from __future__ import annotations

import logging
import os
import secrets
from typing import Any

import numpy as np

from flowjob_core import switches
from flowjob_core.checkpoint import atomic_replace, row_files
from flowjob_core.checkpoint.folder_writes import check_target, make_parent, why, write_file
from flowjob_core.checkpoint.layout import DONE_FILE, META_FILE, OUT_FILE, format_meta, variable_dir
from flowjob_core.errors import CheckpointError
from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.layout import Shard
from flowjob_core.runtime import variable_shards
from flowjob_core.runtime.session import Session
from flowjob_core.runtime.world import World, world_of

logger = logging.getLogger("flowjob.checkpoint")
TOKEN_FILE = ".ranks-token"  # hidden: never read as a variable, removed before the folder is renamed into place


def _failed(exc: BaseException, path: str, parent: str) -> BaseException:
    if isinstance(exc, CheckpointError):  # an OSError too: said already
        return exc
    if isinstance(exc, OSError):
        return CheckpointError(f"saving the checkpoint {path!r} failed: {why(exc, parent)}; {path!r} is unchanged "
                               f"and nothing is left beside it")
    if isinstance(exc, Exception):
        return CheckpointError(f"saving the checkpoint {path!r} failed: {exc!r}; {path!r} is unchanged")
    return exc


def _out(folder: str, name: str) -> str:
    return os.path.join(variable_dir(folder, name), OUT_FILE)


class _Save:
    """One save of split variables, as each rank runs it; ``group`` is rank 0's hidden folder."""

    def __init__(self, path: str, session: Session, overwrite: bool, split: dict[str, list[Shard]]) -> None:
        self.path, self.session, self.overwrite, self.split = path, session, overwrite, split
        self.parent = os.path.dirname(os.path.abspath(path))
        self.world: World = world_of(session)
        self.group: atomic_replace.Group | None = None

    def begin(self, whole: list[tuple[str, BlobSpec, np.ndarray]]) -> tuple[str, str]:
        """Rank 0: the hidden folder with the variables held whole, every meta, the split variables' ``out`` files at
        their full size and the token file; answers (the folder, the token)."""
        path, parent = self.path, self.parent
        make_parent(parent, path)
        atomic_replace.remove_stale(parent)
        check_target(path, self.overwrite)
        try:
            self.group = atomic_replace.begin(path)
        except OSError as exc:
            raise CheckpointError(f"cannot save the checkpoint {path!r}: {why(exc, parent)}; {path!r} is "
                                  f"unchanged") from exc
        tmp = self.group.path("tmp")
        store = self.session.variables
        try:
            for name, spec, value in whole:
                folder = variable_dir(tmp, name)
                os.makedirs(folder, exist_ok=True)
                write_file(os.path.join(folder, META_FILE), format_meta(spec).encode())
                write_file(os.path.join(folder, OUT_FILE), np.ascontiguousarray(value))
                atomic_replace.fsync_dir(folder)
            whole.clear()
            for name in self.split:
                spec = store[name].spec
                folder = variable_dir(tmp, name)
                os.makedirs(folder, exist_ok=True)
                write_file(os.path.join(folder, META_FILE), format_meta(spec).encode())
                row_files.create(os.path.join(folder, OUT_FILE), spec.nbytes)
                atomic_replace.fsync_dir(folder)
            token = secrets.token_hex(16)
            write_file(os.path.join(tmp, TOKEN_FILE), token.encode())
            atomic_replace.fsync_dir(tmp)
        except BaseException as exc:
            atomic_replace.finish(self.group)
            failure = _failed(exc, path, parent)
            if failure is exc:
                raise
            raise failure from exc
        return tmp, token

    def write(self, tmp: str, shared: bool, pieces: dict[str, np.ndarray]) -> str | None:
        """Every rank: its pieces written into place (``shared``), else each split variable gathered onto rank 0,
        which writes every rank's piece; answers this rank's error, None when it wrote all it had to."""
        store, world = self.session.variables, self.world
        error: str | None = None
        for name in self.split:  # in name order on every rank
            spec, piece = store[name].spec, pieces.pop(name)
            try:
                if shared:
                    if error is None:
                        row_files.write_piece(_out(tmp, name), spec, self.split[name][world.rank], piece)
                    continue
                gathered = variable_shards.gather_to_root(world, piece)  # every rank takes part, even after an error
                del piece
                if gathered is not None and error is None:
                    for shard, each in zip(self.split[name], gathered):
                        row_files.write_piece(_out(tmp, name), spec, shard, each)
                del gathered
            except Exception as exc:  # every rank goes on to the outcomes' all-gather, so none waits for ever
                if error is None:
                    said = why(exc, self.parent) if isinstance(exc, OSError) else repr(exc)
                    error = f"writing {name!r}: {said}"
        return error

    def complete(self, outcomes: list[str | None], seen: list[bool], shared: bool) -> None:
        """Rank 0: the folder renamed into place, or removed when a rank failed."""
        assert self.group is not None
        path, parent, tmp = self.path, self.parent, self.group.path("tmp")
        try:
            failed = [(r, e) for r, e in enumerate(outcomes) if e is not None]
            if failed:
                each = "; ".join(f"rank {r}: {e}" for r, e in failed)
                raise CheckpointError(f"saving the checkpoint {path!r} failed on rank(s) {[r for r, _ in failed]} "
                                      f"({each}); {path!r} is unchanged and nothing is left beside it")
            os.remove(os.path.join(tmp, TOKEN_FILE))
            write_file(os.path.join(tmp, DONE_FILE), b"")  # written last: the checkpoint is complete
            atomic_replace.fsync_dir(tmp)
            check_target(path, self.overwrite)  # still absent, empty, or (overwrite) a checkpoint
            atomic_replace.swap_in(self.group)
            atomic_replace.fsync_dir(parent)
        except BaseException as exc:
            failure = _failed(exc, path, parent)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            atomic_replace.finish(self.group)
        names, ranks = sorted(self.split), self.world.size
        if shared:
            logger.info("checkpoint %s: each of the %d ranks wrote its rows of the split variables %s into place",
                        path, ranks, names)
        else:
            unseen = [r for r, s in enumerate(seen) if not s]
            why_not = (f"rank(s) {unseen} do not see the folder rank 0 writes (no shared file system)" if unseen
                       else "FLOWJOB_CHECKPOINT_SPLIT_SAVE=gather on some rank")
            logger.info("checkpoint %s: rank 0 gathered the split variables %s and wrote them (%s)", path, names,
                        why_not)


def _sees(tmp: str, token: str) -> bool:
    try:
        with open(os.path.join(tmp, TOKEN_FILE), "rb") as f:
            return f.read() == token.encode()
    except OSError:
        return False


def save(path: str | os.PathLike[str], session: Session, overwrite: bool, split: dict[str, list[Shard]]) -> None:
    """Every variable of ``session`` saved to ``path`` on every rank (see the module notes); ``split``: the split
    variables' pieces on each rank (``ranks.check_layouts``). Every rank raises the same ``CheckpointError``."""
    run = _Save(os.fspath(path), session, overwrite, split)
    world, store = run.world, session.variables
    with session.between_steps():  # the values of one step, on every rank
        pieces = {name: store.get(name) for name in split}
        whole = [(name, store[name].spec, store.get(name)) for name in store.names()
                 if name not in split] if world.rank == 0 else []
    tmp, token = world.root_only(lambda: run.begin(whole))
    # every rank decides alike from every rank's answers: whether it sees the folder, whether its switch allows rows
    answers = world.allgather((_sees(tmp, token), switches.current().checkpoint_split_save == "rows"))
    seen = [sees for sees, _ in answers]
    shared = all(sees and rows for sees, rows in answers)
    outcomes = world.allgather(run.write(tmp, shared, pieces))
    world.root_only(lambda: run.complete(outcomes, seen, shared))


def _readable(path: str, nbytes: int) -> bool:
    """Whether this rank sees the file rank 0 checked (``nbytes`` long): not on a machine that does not share it."""
    return os.path.isfile(path) and os.path.getsize(path) == nbytes


def load_pieces(session: Session, found: tuple[str, list[str]] | None, data_file: str, keep_missing: bool) -> None:
    """Each split variable set to this rank's rows of ``<folder>/<name>/<data_file>`` (``found``: the folder rank 0
    read and the split variables it found there, their files checked already); one the checkpoint lacks is
    initialized, or with ``keep_missing`` kept. A collective: every rank calls it after rank 0's load."""
    world, store = world_of(session), session.variables
    folder, present = found if found is not None else ("", [])
    mine = {name: store[name].shard for name in present}

    sees = all(_readable(os.path.join(variable_dir(folder, name), data_file), store[name].spec.nbytes)
               for name in present)
    shared = all(world.allgather(sees))
    values: dict[str, np.ndarray] = {}
    for name in present:  # in rank 0's order on every rank
        path, spec, shard = os.path.join(variable_dir(folder, name), data_file), store[name].spec, mine[name]
        assert shard is not None
        if shared:
            values[name] = row_files.read_piece(path, spec, shard)
            continue
        shards: list[Any] = world.allgather(shard)  # rank 0 reads each rank's rows and sends them
        rows: list[tuple[str, Any]] | None = None
        if world.rank == 0:
            try:
                rows = [("rows", row_files.read_piece(path, spec, s)) for s in shards]
            except Exception as exc:  # sent too: the other ranks wait in the scatter, and must not wait forever
                rows = [("failed", f"{type(exc).__name__}: {exc}")] * len(shards)
        kind, piece = variable_shards.scatter_from_root(world, rows)
        if kind == "failed":
            raise CheckpointError(f"loading the checkpoint {folder!r}: rank 0 could not read the rows of variable "
                                  f"{name!r} for the ranks that do not see its files ({piece}); the split "
                                  f"variables keep their values")
        values[name] = piece
    if not shared and world.rank == 0:
        logger.info("checkpoint %s: some ranks do not see its files (no shared file system); rank 0 read each "
                    "rank's rows of %s and sent them", folder, present)
    for name in variable_shards.split_names(session):
        if name not in values and not keep_missing:
            values[name] = store.initial_piece(name)
    with session.between_steps():
        for name, value in values.items():
            store.assign_local(name, value)


__all__ = ["TOKEN_FILE", "load_pieces", "save"]
