"""Checkpoints in the legacy layout: ``flow.train.CheckPoint``, ``SimpleCheckPointManager``,
``flow.checkpoint.save/get`` and ``flow.load_variables``.

A checkpoint is a folder: per variable ``<path>/<name>/out`` (the raw bytes of the whole
array, C order, native dtype, no header) and ``<path>/<name>/meta`` (text protobuf:
``shape { dim: ... }`` and ``data_type: kFloat``), plus an empty ``<path>/snapshot_done``.
Train step counters and optimizer slots are variables like any other and are saved too.

Where legacy aborted the process, these raise ``CheckpointError`` naming the folder or
variable: a non-empty target folder (left untouched), a file of the wrong size or a meta
that disagrees with the variable (nothing is assigned then: every file is checked before
the first assignment). A save writes a hidden sibling folder, fsyncs it and renames it into
place, so an interrupted save never leaves a half checkpoint behind; ``overwrite=True``
replaces an existing checkpoint by an atomic swap (``checkpoint_files``: the hidden files,
the swap, and how a later save or load removes what killed saves left).

Loads are strict where legacy loaded nothing silently: a folder that is empty, lacks
``snapshot_done`` or holds none of the session's variables is a ``CheckpointError`` saying
what was expected and found. A checkpoint lacking some variables initializes those with a
``warnings.warn`` naming each (legacy printed a line), or refuses with ``strict=True``.
"""
from __future__ import annotations

import datetime
import errno
import os
import re
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from flowjob_core.api import checkpoint_files
from flowjob_core.ir import dtypes
from flowjob_core.errors import CheckpointError, VariableError
from flowjob_core.ir.job import BlobSpec
from flowjob_core.api.variable_blobs import FileVariableBlob, host_value
from flowjob_core.runtime.session import Session, get_default_session
from flowjob_core.api.flow_config_options import legacy_model_io_enabled
from flowjob_core.runtime.world import world_of

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction

OUT_FILE = "out"
META_FILE = "meta"
DONE_FILE = checkpoint_files.DONE_FILE

DATA_TYPES: dict[np.dtype, str] = {
    dtypes.float32: "kFloat", dtypes.float64: "kDouble", dtypes.int8: "kInt8", dtypes.int32: "kInt32",
    dtypes.int64: "kInt64", dtypes.uint8: "kUInt8", dtypes.float16: "kFloat16",
}
_BY_DATA_TYPE = {v: k for k, v in DATA_TYPES.items()}
_DIM = re.compile(r"\bdim\s*:\s*(-?\d+)")
_DATA_TYPE = re.compile(r"\bdata_type\s*:\s*(\w+)")


class CheckpointWarning(UserWarning):
    """A checkpoint lacks some of the session's variables: they are initialized instead."""


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


def variable_dir(root: str, name: str) -> str:
    """``<root>/<name>``; a name that would leave the folder (``..``, absolute) is an error."""
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in name \
            or (os.sep != "/" and os.sep in name) or name == DONE_FILE:
        raise CheckpointError(f"variable name {name!r} cannot be stored as a checkpoint folder")
    return os.path.join(root, *parts)


def format_meta(spec: BlobSpec) -> str:
    """The text-protobuf ``meta`` of a variable, as legacy wrote it."""
    try:
        data_type = DATA_TYPES[spec.dtype]
    except KeyError:
        raise CheckpointError(f"dtype {spec.dtype} has no checkpoint data_type") from None
    dims = "".join(f"  dim: {d}\n" for d in spec.shape)
    return f"shape {{\n{dims}}}\ndata_type: {data_type}\n"


def parse_meta(text: str, where: str) -> BlobSpec:
    """Shape and dtype from a ``meta`` file (one-line or multi-line text protobuf)."""
    match = _DATA_TYPE.search(text)
    if "shape" not in text or match is None:
        raise CheckpointError(f"{where}: not a variable meta (expected 'shape {{ dim: ... }}' and 'data_type: ...')")
    if match.group(1) not in _BY_DATA_TYPE:
        raise CheckpointError(f"{where}: unsupported data_type {match.group(1)!r}; known: {sorted(_BY_DATA_TYPE)}")
    shape = tuple(int(d) for d in _DIM.findall(text))
    if any(d < 0 for d in shape):
        raise CheckpointError(f"{where}: negative dimension in shape {shape}")
    return BlobSpec(shape, _BY_DATA_TYPE[match.group(1)])


def _describe(spec: BlobSpec) -> str:
    return f"shape {spec.shape} {spec.dtype} ({spec.nbytes} bytes)"


def _write(path: str, data: bytes | np.ndarray) -> None:
    with open(path, "wb") as f:
        # through the file object, not ndarray.tofile: a full disk is then OSError(ENOSPC), where tofile
        # says only "40000 requested and 8192 written"
        f.write(np.ascontiguousarray(data).data.cast("B") if isinstance(data, np.ndarray) else data)
        f.flush()
        os.fsync(f.fileno())


def _read_meta(meta: str) -> BlobSpec:
    """A ``meta`` file's spec; bytes that are not text are a ``CheckpointError`` naming the file."""
    with open(meta, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{meta}: not a variable meta (not UTF-8 text: {exc.reason} at byte {exc.start}); "
                              f"the checkpoint is damaged or not a flowjob/OneFlow checkpoint") from None
    return parse_meta(text, meta)


def _check_target(path: str, overwrite: bool) -> None:
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: it exists and is not a folder")
    if not os.listdir(path):
        return
    if not overwrite:
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: the folder is not empty (legacy: 'root "
                              f"directory of model snapshot not empty'); choose a new folder, or pass "
                              f"overwrite=True to replace a checkpoint")
    if not checkpoint_files.is_complete(path):  # never replace a folder the user keeps other things in
        raise CheckpointError(f"cannot save a checkpoint to {path!r} with overwrite=True: the folder is not a "
                              f"checkpoint (no {DONE_FILE!r} file), so it is not replaced")


def _make_parent(parent: str, path: str) -> None:
    """Create the parent folders; a file on the way is a ``CheckpointError`` naming it."""
    ancestor = parent
    while not os.path.exists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if os.path.exists(ancestor) and not os.path.isdir(ancestor):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: {ancestor!r} is a file, not a folder")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: cannot create the folder {parent!r}: "
                              f"{exc.strerror or exc}") from exc


def _why(exc: OSError, parent: str) -> str:
    """An OS error of a save said in terms of the checkpoint's folder, not of a hidden temporary file."""
    if exc.errno == errno.ENOSPC:
        return f"the file system holding {parent!r} is full"
    if exc.errno == errno.EDQUOT:
        return f"the disk quota of the file system holding {parent!r} is used up"
    if exc.errno == errno.EROFS:
        return f"{parent!r} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {parent!r}"
    return f"{exc.strerror or exc} ({type(exc).__name__})"


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
    atomically: at every instant ``path`` is the old or the new complete checkpoint (see ``checkpoint_files``).
    """
    session = _session(session)
    if _on_ranks(session, lambda: save(path, session, overwrite, var_dict), broadcast=False):
        return
    if var_dict is None:
        prepare(session)
    else:
        session.sync()
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    _make_parent(parent, path)
    checkpoint_files.remove_stale(parent)
    _check_target(path, overwrite)
    for name in var_dict or ():  # a bad name fails before anything is written
        variable_dir(path, name)
    try:
        group = checkpoint_files.begin(path)
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
            checkpoint_files.fsync_dir(folder)
        _write(os.path.join(tmp, DONE_FILE), b"")  # written last: the checkpoint is complete
        checkpoint_files.fsync_dir(tmp)
        _check_target(path, overwrite)  # still absent, empty, or (overwrite) a checkpoint
        checkpoint_files.swap_in(group)
        checkpoint_files.fsync_dir(parent)
    except BaseException as exc:
        if isinstance(exc, OSError):
            raise CheckpointError(f"saving the checkpoint {path!r} failed: {_why(exc, parent)}; {path!r} is "
                                  f"unchanged and nothing is left beside it") from exc
        if not isinstance(exc, CheckpointError) and isinstance(exc, Exception):
            raise CheckpointError(f"saving the checkpoint {path!r} failed: {exc!r}; "
                                  f"{path!r} is unchanged") from exc
        raise
    finally:
        checkpoint_files.finish(group)


def _read_checked(out: str, spec: BlobSpec, name: str, root: str) -> np.ndarray:
    size = os.path.getsize(out)
    if size != spec.nbytes:
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                              f"{spec.nbytes} for {_describe(spec)}")
    value = np.fromfile(out, dtype=spec.dtype)
    if value.size != spec.size:  # the file changed while it was read
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} was cut short while being read")
    return value.reshape(spec.shape)


def _stored_names(root: str) -> list[str]:
    """Names of the variables stored in a checkpoint folder (folders holding an ``out`` file)."""
    names = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if OUT_FILE in files and not os.path.samefile(folder, root):
            names.append(os.path.relpath(folder, root).replace(os.sep, "/"))
    return sorted(names)


def _few(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _open_checkpoint(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(the folder as given, the folder to read): stale saves beside it cleaned up, and the folder
    checked to be a checkpoint, else a ``CheckpointError`` saying what was expected and found."""
    root = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(root))
    checkpoint_files.remove_stale(parent)  # also renames back a checkpoint a killed swap left aside
    read = checkpoint_files.reading_path(root)
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
        inner = sorted(e for e in entries if checkpoint_files.is_complete(os.path.join(read, e)))
        if inner:
            found = f"it holds the checkpoints {_few(inner)}: load one of those"
        elif OUT_FILE in entries:
            found = f"it holds an {OUT_FILE!r} file: it is one variable's folder; load its parent"
        elif _stored_names(read):
            found = (f"found the variables {_few(_stored_names(read))}: an interrupted copy, or a complete "
                     f"checkpoint of an older OneFlow (then create an empty {DONE_FILE!r} in it)")
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
    return FileVariableBlob(_read_checked(out, _read_meta(meta), name, root), out)


def get(path: str | os.PathLike[str]) -> Any:
    """``flow.checkpoint.get(path)``: every variable of a checkpoint folder, by name, each the host array
    with legacy's ``numpy()``; given one variable's folder (``<checkpoint>/<name>``), that variable alone."""
    given = os.fspath(path)
    if os.path.isfile(os.path.join(given, OUT_FILE)):  # legacy: a variable folder reads as that variable
        return _get_one(given, os.path.basename(os.path.normpath(given)), given)
    root, read = _open_checkpoint(path)
    return {name: _get_one(variable_dir(read, name), name, root) for name in _stored_names(read)}


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


# the legacy object --------------------------------------------------------
def initialize(session: Session | None = None) -> None:
    """Every variable of every defined job set from its initializer."""
    session = _session(session)
    if _on_ranks(session, lambda: initialize(session), broadcast=True):
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
    if _on_ranks(session, lambda: load(path, session, strict, keep_missing), broadcast=True):
        return
    prepare(session)
    root, read = _open_checkpoint(path)
    store = session.variables
    wanted = list(store.names())
    missing = [name for name in wanted if not os.path.isfile(os.path.join(variable_dir(read, name), OUT_FILE))]
    if wanted and len(missing) == len(wanted):
        raise CheckpointError(f"checkpoint {root!r} holds none of this session's {len(wanted)} variables "
                              f"(expected {_few(sorted(wanted))}); it holds {_few(_stored_names(read)) or 'none'}")
    if missing and strict:
        raise CheckpointError(f"checkpoint {root!r} lacks {len(missing)} of this session's variables (strict=True): "
                              f"{', '.join(repr(n) for n in missing)}")
    present = [name for name in wanted if name not in set(missing)]
    for name in present:
        spec = store[name].spec
        folder = variable_dir(read, name)
        meta = os.path.join(folder, META_FILE)
        if os.path.isfile(meta):
            found = _read_meta(meta)
            if found != spec:
                raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: this session has {_describe(spec)}, "
                                      f"the checkpoint's meta says {_describe(found)} ({meta})")
        out = os.path.join(folder, OUT_FILE)
        size = os.path.getsize(out)
        if size != spec.nbytes:
            raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                                  f"{spec.nbytes} for {_describe(spec)}")
    # every file checked: now read them all, then assign
    values = {name: _read_checked(os.path.join(variable_dir(read, name), OUT_FILE), store[name].spec, name, root)
              for name in present}
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


class CheckPoint:
    """``flow.train.CheckPoint()``: ``init()``, ``save(path)``, ``load(path)`` for every variable of the session.

    Each first finishes the steps already launched and traces and plans every defined job
    (a job replaced by one of the same name included), so every variable exists. After
    ``flow.config.enable_legacy_model_io(False)`` they act as legacy v0.4's model I/O v2 did:
    ``init()`` initializes nothing (variables already are), ``load`` keeps the value of a variable
    the checkpoint lacks (as ``flow.load_variables(flow.checkpoint.get(path))``).
    """

    def __init__(self, session: Session | None = None) -> None:
        self._session = session

    def init(self) -> None:
        if legacy_model_io_enabled():
            initialize(self._session)
        else:
            prepare(_session(self._session))

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        save(path, self._session, overwrite=overwrite)

    def load(self, path: str | os.PathLike[str], strict: bool = False) -> None:
        load(path, self._session, strict=strict, keep_missing=not legacy_model_io_enabled())


class SimpleCheckPointManager:
    """``flow.train.SimpleCheckPointManager(root_path, prefix="snapshot_")``: timestamped checkpoints in one folder."""

    def __init__(self, root_path: str | os.PathLike[str], prefix: str = "snapshot_",
                 session: Session | None = None) -> None:
        self.root_path = os.fspath(root_path)
        if os.path.exists(self.root_path) and not os.path.isdir(self.root_path):
            raise CheckpointError(f"SimpleCheckPointManager: {self.root_path!r} exists and is not a folder")
        os.makedirs(self.root_path, exist_ok=True)
        self.prefix = prefix
        self._checkpoint = CheckPoint(session)

    def _path(self, name: str) -> str:
        return os.path.join(self.root_path, name)

    def list_checkpoints(self) -> list[str]:
        """Names of the complete checkpoints (with ``snapshot_done``) under the root, sorted."""
        return sorted(n for n in os.listdir(self.root_path)
                      if n.startswith(self.prefix) and not n.startswith(".")
                      and os.path.isfile(os.path.join(self._path(n), DONE_FILE)))

    def latest_checkpoint(self) -> str | None:
        names = self.list_checkpoints()
        return names[-1] if names else None

    def initialize_or_restore(self) -> None:
        """Load the latest checkpoint, or initialize every variable when there is none."""
        name = self.latest_checkpoint()
        if name is None:
            self._checkpoint.init()
        else:
            self._checkpoint.load(self._path(name))

    def save(self) -> None:
        """Save to ``<root>/<prefix><YYYYmmdd_HHMMSS_ffffff>``."""
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        self._checkpoint.save(self._path(f"{self.prefix}{stamp}"))


__all__ = ["CheckPoint", "CheckpointWarning", "SimpleCheckPointManager", "get", "load_variables", "save"]


# several processes (a flowjob_world plugin such as flowjob-mpi) ------------------------------------
_ranks = threading.local()


def _on_ranks(session: Session, again: Any, *, broadcast: bool) -> bool:
    """In a world of several ranks, run ``again`` (the calling function, same arguments) the way a
    checkpoint is kept there and answer True: rank 0 alone reads and writes the files (a checkpoint is
    written once, through the same atomic replace), every rank raises what rank 0 raised, and with
    ``broadcast`` every rank then takes rank 0's variables, so they start bitwise equal. In one process,
    or inside that run, answer False: the caller goes on as usual."""
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
