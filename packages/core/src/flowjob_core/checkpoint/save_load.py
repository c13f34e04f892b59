"""Saving and loading checkpoint folders (``layout``): ``flow.checkpoint.save/get``, ``flow.load_variables``,
and what ``flow.train.CheckPoint`` (``session_checkpoint``) does.

Train step counters and optimizer slots are variables like any other and are saved too.

Where legacy aborted the process, these raise ``CheckpointError`` naming the folder or
variable: a non-empty target folder (left untouched), a file of the wrong size or a meta
that disagrees with the variable (nothing is assigned then: every file is checked before
the first assignment). A save writes a hidden sibling folder, fsyncs it and renames it into
place, so an interrupted save never leaves a half checkpoint behind; ``overwrite=True``
replaces an existing checkpoint by an atomic swap (``atomic_replace``: the hidden files,
the swap, and how a later save or load removes what killed saves left).

Loads are strict where legacy loaded nothing silently: a folder that is empty, holds none of the
session's variables, or lacks ``snapshot_done`` though a flowjob or OneFlow save wrote it (its
``meta`` files say so: ``layout``) is a ``CheckpointError`` saying what was expected and found. A
folder of bare ``<name>/out`` files another program wrote loads with a ``CheckpointWarning``. A
checkpoint lacking some variables initializes those with a ``warnings.warn`` naming each (legacy
printed a line), or refuses with ``strict=True``.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from flowjob_core.checkpoint import atomic_replace, split_files
from flowjob_core.checkpoint.folder_writes import check_target as _check_target
from flowjob_core.checkpoint.folder_writes import make_parent as _make_parent
from flowjob_core.checkpoint.folder_writes import why as _why
from flowjob_core.checkpoint.folder_writes import write_file as _write
from flowjob_core.checkpoint.layout import (DATA_TYPES, DONE_FILE, META_FILE, OUT_FILE, describe, format_meta,
                                            is_foreign, read_meta, stored_names, variable_dir)
from flowjob_core.checkpoint.ranks import check_layouts, inside_rank_0, note_split_files, on_ranks
from flowjob_core.checkpoint.variable_blobs import FileVariableBlob, host_value
from flowjob_core.errors import CheckpointError, VariableError
from flowjob_core.ir import dtypes
from flowjob_core.ir.job import BlobSpec
from flowjob_core.runtime import variable_shards
from flowjob_core.runtime.session import Session, get_default_session
from flowjob_core.runtime.world import world_of

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction


class CheckpointWarning(UserWarning):
    """What a load goes on after: a variable the checkpoint lacks (initialized instead, or kept), or a folder
    another program wrote that carries no completion mark."""


# helpers ------------------------------------------------------------------
def _session(session: Session | None) -> Session:
    return session if session is not None else get_default_session()


def defined_functions(session: Session) -> list[JobFunction]:
    """Every job defined in the session: the latest of each name first (definition order), then those a
    later definition of the same name replaced whose variables are not declared yet (they still run if the
    program kept them; one that ran its passes has its variables, optimizer slots too, in the session)."""
    latest = list(session.functions.values())
    replaced = []
    for fn in latest:
        earlier = fn.replaced
        while earlier is not None:
            if not earlier.declared:  # one that ran its passes has its variables in the session already
                replaced.append(earlier)
            earlier = earlier.replaced
    return latest + replaced[::-1]


def prepare(session: Session) -> None:
    """Finish pending steps, then trace and plan every defined job, so every variable exists
    (optimizer slots and train step counters are declared by the optimizer pass)."""
    session.sync()
    session.trace_all()
    functions = defined_functions(session)
    for fn in functions:
        fn.ensure_traced()
    for fn in functions:
        fn.plan()


# version 0.3 functions ----------------------------------------------------
def _to_save(session: Session, var_dict: Mapping[str, Any] | None) -> Iterator[tuple[str, BlobSpec, np.ndarray]]:
    """(name, spec, host array) of every variable of the session, or of each entry of ``var_dict``.

    The session's variables are copied together between two steps (``Session.between_steps``): another
    thread may be training, and a snapshot holds the values of one step, every variable and the train step
    counter alike. The copy is all that holds the steps off; the files are written after it."""
    if var_dict is None:
        store = session.variables
        with session.between_steps():
            snapshot = [(name, store[name].spec, store.get(name)) for name in store.names()]
        yield from snapshot
        return
    for name, value in var_dict.items():
        array = np.ascontiguousarray(host_value(value))
        if array.dtype not in DATA_TYPES:
            raise CheckpointError(f"cannot save {name!r}: dtype {array.dtype} has no checkpoint data_type; "
                                  f"known: {sorted(str(d) for d in DATA_TYPES)}")
        yield name, BlobSpec(array.shape, array.dtype), array


def save(path: str | os.PathLike[str], session: Session | None = None, overwrite: bool = False,
         var_dict: Mapping[str, Any] | None = None) -> None:
    """``flow.checkpoint.save(path)``: every variable of the session into a new folder ``path``.

    ``var_dict`` (legacy v0.4): only these values (blobs of ``get_all_variables``/``get`` or arrays)
    under their names. ``overwrite=True`` (an extension) replaces the checkpoint at ``path``
    atomically: at every instant ``path`` is the old or the new complete checkpoint (see ``atomic_replace``).
    """
    session = _session(session)
    world = world_of(session)
    if var_dict is None and world.size > 1 and not inside_rank_0():
        prepare(session)  # on every rank: each then holds the same split variables, or check_layouts says which not
        split = check_layouts(session, world)
        if split:  # each rank writes its rows of them into place (split_files)
            split_files.save(path, session, overwrite, split)
            return
    if on_ranks(session, lambda: save(path, session, overwrite, var_dict), prepare, broadcast=False):
        return
    if var_dict is None:
        prepare(session)
    else:
        session.sync()
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    _make_parent(parent, path)
    atomic_replace.remove_stale(parent)
    _check_target(path, overwrite)
    for name in var_dict or ():  # a bad name fails before anything is written
        variable_dir(path, name)
    try:
        group = atomic_replace.begin(path)
    except OSError as exc:
        raise CheckpointError(f"cannot save the checkpoint {path!r}: {_why(exc, parent)}; {path!r} is "
                              f"unchanged") from exc
    tmp = group.path("tmp")
    try:
        for name, spec, value in _to_save(session, var_dict):
            folder = variable_dir(tmp, name)
            os.makedirs(folder, exist_ok=True)
            _write(os.path.join(folder, META_FILE), format_meta(spec).encode())
            _write(os.path.join(folder, OUT_FILE), np.ascontiguousarray(value))
            atomic_replace.fsync_dir(folder)
        _write(os.path.join(tmp, DONE_FILE), b"")  # written last: the checkpoint is complete
        atomic_replace.fsync_dir(tmp)
        _check_target(path, overwrite)  # still absent, empty, or (overwrite) a checkpoint
        atomic_replace.swap_in(group)
        atomic_replace.fsync_dir(parent)
    except BaseException as exc:
        if isinstance(exc, OSError):
            raise CheckpointError(f"saving the checkpoint {path!r} failed: {_why(exc, parent)}; {path!r} is "
                                  f"unchanged and nothing is left beside it") from exc
        if not isinstance(exc, CheckpointError) and isinstance(exc, Exception):
            raise CheckpointError(f"saving the checkpoint {path!r} failed: {exc!r}; "
                                  f"{path!r} is unchanged") from exc
        raise
    finally:
        atomic_replace.finish(group)


def _read_checked(out: str, spec: BlobSpec, name: str, root: str) -> np.ndarray:
    size = os.path.getsize(out)
    if size != spec.nbytes:
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                              f"{spec.nbytes} for {describe(spec)}")
    value = np.fromfile(out, dtype=spec.dtype)
    if value.size != spec.size:  # the file changed while it was read
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} was cut short while being read")
    return value.reshape(spec.shape)


def _few(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _open_checkpoint(path: str | os.PathLike[str], stacklevel: int) -> tuple[str, str]:
    """(the folder as given, the folder to read): stale saves beside it cleaned up, and the folder
    checked to be a checkpoint, else a ``CheckpointError`` saying what was expected and found.

    A folder without ``snapshot_done`` is read only when it is another program's: bare ``<name>/out``
    files, no ``meta`` beside any of them (``is_foreign``), with a ``CheckpointWarning`` naming it; the
    caller then checks each file's size against its variable before assigning anything."""
    root = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(root))
    atomic_replace.remove_stale(parent)  # also renames back a checkpoint a killed swap left aside
    read = atomic_replace.reading_path(root)
    if not os.path.lexists(read):
        raise CheckpointError(f"checkpoint folder {root!r} does not exist")
    if not os.path.isdir(read):
        raise CheckpointError(f"checkpoint folder {root!r} is a file; expected a folder holding {DONE_FILE!r} "
                              f"and one folder per variable")
    entries = sorted(e for e in os.listdir(read) if not e.startswith("."))
    if not entries:
        raise CheckpointError(f"checkpoint folder {root!r} is empty; expected {DONE_FILE!r} and one folder per "
                              f"variable ('<name>/out', '<name>/meta')")
    if not os.path.isfile(os.path.join(read, DONE_FILE)):
        inner = sorted(e for e in entries if atomic_replace.is_complete(os.path.join(read, e)))
        names = stored_names(read)
        if inner:
            found = f"it holds the checkpoints {_few(inner)}: load one of those"
        elif OUT_FILE in entries:
            found = f"it holds an {OUT_FILE!r} file: it is one variable's folder; load its parent"
        elif names and is_foreign(read, names):
            warnings.warn(f"checkpoint folder {root!r} carries no completion mark (no {DONE_FILE!r}, no {META_FILE!r} "
                          f"files: written by another program, not by a flowjob or OneFlow save); loading its "
                          f"{len(names)} variables after checking each {OUT_FILE!r} file's size against its variable",
                          CheckpointWarning, stacklevel=stacklevel + 1)
            return root, read
        elif names:
            found = (f"found the variables {_few(names)}: an interrupted copy, or a complete "
                     f"checkpoint of an older OneFlow (then create an empty {DONE_FILE!r} in it); their "
                     f"{META_FILE!r} files say a flowjob or OneFlow save wrote them, which writes {DONE_FILE!r} last")
        else:
            found = f"found {_few(entries)}"
        raise CheckpointError(f"{root!r} is not a checkpoint folder: no {DONE_FILE!r} file (a save writes it last); "
                              f"{found}")
    return root, read


def _get_one(folder: str, name: str, root: str) -> FileVariableBlob:
    meta = os.path.join(folder, META_FILE)
    if not os.path.isfile(meta):
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: no {META_FILE} file (a checkpoint of "
                              f"OneFlow before 0.3?): load it with flow.train.CheckPoint().load({root!r})")
    out = os.path.join(folder, OUT_FILE)
    return FileVariableBlob(_read_checked(out, read_meta(meta), name, root), out)


def get(path: str | os.PathLike[str]) -> Any:
    """``flow.checkpoint.get(path)``: every variable of a checkpoint folder, by name, each the host array
    with legacy's ``numpy()``; given one variable's folder (``<checkpoint>/<name>``), that variable alone."""
    given = os.fspath(path)
    if os.path.isfile(os.path.join(given, OUT_FILE)):  # legacy: a variable folder reads as that variable
        return _get_one(given, os.path.basename(os.path.normpath(given)), given)
    root, read = _open_checkpoint(path, stacklevel=2)
    return {name: _get_one(variable_dir(read, name), name, root) for name in stored_names(read)}


def load_variables(value_dict: Mapping[str, Any], ignore_mismatch: bool = True,
                   session: Session | None = None) -> None:
    """``flow.load_variables(values)``: assign arrays or blobs by variable name (all checked before any is assigned).

    A name that is no variable of the session is skipped (legacy v0.4 default: a predict job loads
    a train job's checkpoint, optimizer state included), or with ``ignore_mismatch=False`` an error
    naming it. A value whose shape or dtype does not fit its variable is always an error (legacy asserted).
    """
    session = _session(session)
    prepare(session)
    store = session.variables
    chosen: dict[str, np.ndarray] = {}
    for name, value in value_dict.items():
        if name not in store:
            if ignore_mismatch:
                continue
            raise VariableError(f"load_variables: no variable named {name!r} in this session (known: "
                                f"{sorted(store.names())}); ignore_mismatch=True skips it")
        array = host_value(value)
        spec = store[name].spec
        fits = array.shape == spec.shape and np.can_cast(array.dtype, spec.dtype, casting="same_kind")
        if not fits:
            raise VariableError(f"load_variables: variable {name!r} is {spec.shape} {spec.dtype}, the value is "
                                f"{array.shape} {array.dtype}")
        lost = dtypes.unfit_value(array, spec.dtype)
        if lost is not None:  # 1e40 into float32 would be inf
            raise VariableError(f"load_variables: variable {name!r} is {spec.dtype}; the {array.dtype} value's {lost} "
                                f"(nothing was assigned)")
        chosen[name] = array
    with session.between_steps():  # all between the same two steps of a thread that trains meanwhile
        for name, array in chosen.items():
            store.assign(name, array)


# what flow.train.CheckPoint does ------------------------------------------
def initialize(session: Session | None = None) -> None:
    """Every variable of every defined job set from its initializer."""
    session = _session(session)
    if on_ranks(session, lambda: initialize(session), prepare, broadcast=True,
                pieces=lambda _found: variable_shards.initialize_pieces(session)):
        return
    prepare(session)
    store = session.variables
    for name in store.names():
        store.initialize(name)


def load(path: str | os.PathLike[str], session: Session | None = None, strict: bool = False,
         keep_missing: bool = False) -> None:
    """Every variable from ``<path>/<name>/out``, all files checked before the first is assigned.

    A variable the checkpoint lacks is initialized with a warning naming it (legacy's leniency:
    fine-tuning loads a model without optimizer slots), or, with ``strict=True``, an error;
    ``keep_missing`` keeps its current value instead (legacy's model I/O v2 loaded only what it found).
    """
    session = _session(session)
    if on_ranks(session, lambda: load(path, session, strict, keep_missing), prepare, broadcast=True,
                pieces=lambda found: split_files.load_pieces(session, found, OUT_FILE, keep_missing)):
        return
    prepare(session)
    root, read = _open_checkpoint(path, stacklevel=3)
    store = session.variables
    wanted = list(store.names())
    missing = [name for name in wanted if not os.path.isfile(os.path.join(variable_dir(read, name), OUT_FILE))]
    if wanted and len(missing) == len(wanted):
        raise CheckpointError(f"checkpoint {root!r} holds none of this session's {len(wanted)} variables "
                              f"(expected {_few(sorted(wanted))}); it holds {_few(stored_names(read)) or 'none'}")
    if missing and strict:
        raise CheckpointError(f"checkpoint {root!r} lacks {len(missing)} of this session's variables (strict=True): "
                              f"{', '.join(repr(n) for n in missing)}")
    present = [name for name in wanted if name not in set(missing)]
    for name in present:
        spec = store[name].spec
        folder = variable_dir(read, name)
        meta = os.path.join(folder, META_FILE)
        if os.path.isfile(meta):
            found = read_meta(meta)
            if found != spec:
                raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: this session has {describe(spec)}, "
                                      f"the checkpoint's meta says {describe(found)} ({meta})")
        out = os.path.join(folder, OUT_FILE)
        size = os.path.getsize(out)
        if size != spec.nbytes:
            raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                                  f"{spec.nbytes} for {describe(spec)}")
    # every file checked: now read them all, then assign; on several ranks each reads its own rows of a split
    # variable after this (split_files.load_pieces), so none reads a split variable's whole file
    on_ranks_split = [name for name in present if store[name].shard is not None] if inside_rank_0() else []
    values = {name: _read_checked(os.path.join(variable_dir(read, name), OUT_FILE), store[name].spec, name, root)
              for name in present if name not in on_ranks_split}
    note_split_files(read, on_ranks_split)
    with session.between_steps():  # all between the same two steps of a thread that trains meanwhile
        for name, value in values.items():
            store.assign(name, value)
    for name in missing:
        out = os.path.join(variable_dir(root, name), OUT_FILE)
        kept = "it keeps its value" if keep_missing else "it is initialized"
        warnings.warn(f"checkpoint {root!r} has no variable {name!r} ({out}); {kept}", CheckpointWarning,
                      stacklevel=3)
        if not keep_missing:
            store.initialize(name)


__all__ = ["CheckpointWarning", "get", "initialize", "load", "load_variables", "prepare", "save"]

