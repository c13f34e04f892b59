"""Checkpoints in the legacy layout: ``flow.train.CheckPoint``, ``SimpleCheckPointManager``,
``flow.checkpoint.save/get`` and ``flow.load_variables``.

A checkpoint is a folder: per variable ``<path>/<name>/out`` (the raw bytes of the whole
array, C order, native dtype, no header) and ``<path>/<name>/meta`` (text protobuf:
``shape { dim: ... }`` and ``data_type: kFloat``), plus an empty ``<path>/snapshot_done``.
Train step counters and optimizer slots are variables like any other and are saved too.

Where legacy aborted the process, these raise ``CheckpointError`` naming the folder or
variable: a non-empty target folder (left untouched), a file of the wrong size or a meta
that disagrees with the variable (nothing is assigned then: every file is checked before
the first assignment). A save writes a temporary sibling folder and renames it, so an
interrupted save never leaves a half checkpoint behind.
"""
from __future__ import annotations

import datetime
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from flowjob_core import dtypes
from flowjob_core.errors import CheckpointError, VariableError
from flowjob_core.ir import BlobSpec
from flowjob_core.session import Session, get_default_session

OUT_FILE = "out"
META_FILE = "meta"
DONE_FILE = "snapshot_done"

DATA_TYPES: dict[np.dtype, str] = {
    dtypes.float32: "kFloat", dtypes.float64: "kDouble", dtypes.int8: "kInt8", dtypes.int32: "kInt32",
    dtypes.int64: "kInt64", dtypes.uint8: "kUInt8", dtypes.float16: "kFloat16",
}
_BY_DATA_TYPE = {v: k for k, v in DATA_TYPES.items()}
_DIM = re.compile(r"\bdim\s*:\s*(-?\d+)")
_DATA_TYPE = re.compile(r"\bdata_type\s*:\s*(\w+)")


# helpers ------------------------------------------------------------------
def _session(session: Session | None) -> Session:
    return session if session is not None else get_default_session()


def prepare(session: Session) -> None:
    """Finish pending steps, then trace and plan every defined job, so every variable exists
    (optimizer slots and train step counters are declared by the optimizer pass)."""
    session.sync()
    session.trace_all()
    for fn in list(session.functions.values()):
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


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write(path: str, data: bytes | np.ndarray) -> None:
    with open(path, "wb") as f:
        if isinstance(data, np.ndarray):
            data.tofile(f)
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _check_target(path: str) -> None:
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: it exists and is not a folder")
    if os.listdir(path):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: the folder is not empty (legacy: 'root "
                              f"directory of model snapshot not empty'); choose a new folder or remove it")


# version 0.3 functions ----------------------------------------------------
def save(path: str | os.PathLike[str], session: Session | None = None) -> None:
    """``flow.checkpoint.save(path)``: every variable of the session into a new folder ``path``."""
    session = _session(session)
    prepare(session)
    path = os.fspath(path)
    _check_target(path)
    store = session.variables
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(path))}.", suffix=".tmp", dir=parent)
    try:
        for name in store.names():
            folder = variable_dir(tmp, name)
            os.makedirs(folder, exist_ok=True)
            spec = store[name].spec
            _write(os.path.join(folder, META_FILE), format_meta(spec).encode())
            _write(os.path.join(folder, OUT_FILE), np.ascontiguousarray(store.get(name)))
            _fsync_dir(folder)
        _write(os.path.join(tmp, DONE_FILE), b"")
        _fsync_dir(tmp)
        _check_target(path)  # still absent or empty
        try:
            os.replace(tmp, path)  # POSIX: replaces an empty folder atomically
        except OSError:
            if os.name != "nt" or not os.path.isdir(path) or os.listdir(path):
                raise
            os.rmdir(path)
            os.replace(tmp, path)
        _fsync_dir(parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, CheckpointError) or not isinstance(exc, Exception):
            raise
        raise CheckpointError(f"saving the checkpoint {path!r} failed: {exc!r}; nothing was written") from exc


def _read_checked(out: str, spec: BlobSpec, name: str, root: str) -> np.ndarray:
    size = os.path.getsize(out)
    if size != spec.nbytes:
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                              f"{spec.nbytes} for {_describe(spec)}")
    value = np.fromfile(out, dtype=spec.dtype)
    if value.size != spec.size:  # the file changed while it was read
        raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} was cut short while being read")
    return value.reshape(spec.shape)


def get(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """``flow.checkpoint.get(path)``: every variable of a checkpoint folder as a host array, by name."""
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise CheckpointError(f"checkpoint folder {root!r} does not exist")
    values: dict[str, np.ndarray] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if OUT_FILE not in files or os.path.samefile(folder, root):
            continue
        name = os.path.relpath(folder, root).replace(os.sep, "/")
        meta = os.path.join(folder, META_FILE)
        if not os.path.isfile(meta):
            raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: no {META_FILE} file (a checkpoint of "
                                  f"OneFlow before 0.3?): load it with flow.train.CheckPoint().load({root!r})")
        with open(meta, encoding="utf-8") as f:
            spec = parse_meta(f.read(), meta)
        values[name] = _read_checked(os.path.join(folder, OUT_FILE), spec, name, root)
    return dict(sorted(values.items()))


def load_variables(value_dict: Mapping[str, Any], ignore_mismatch: bool = False,
                   session: Session | None = None) -> None:
    """``flow.load_variables(values)``: assign arrays by variable name (all checked before any is assigned).

    A name that is no variable of the session, or a value whose shape or dtype does not fit,
    is an error unless ``ignore_mismatch`` (then it is skipped).
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
                                f"{sorted(store.names())}); pass ignore_mismatch=True to skip it")
        array = np.asarray(value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value)
        spec = store[name].spec
        fits = array.shape == spec.shape and np.can_cast(array.dtype, spec.dtype, casting="same_kind")
        if not fits:
            if ignore_mismatch:
                continue
            raise VariableError(f"load_variables: variable {name!r} is {spec.shape} {spec.dtype}, the value is "
                                f"{array.shape} {array.dtype}")
        chosen[name] = array
    for name, array in chosen.items():
        store.assign(name, array)


# the legacy object --------------------------------------------------------
def initialize(session: Session | None = None) -> None:
    """Every variable of every defined job set from its initializer."""
    session = _session(session)
    prepare(session)
    store = session.variables
    for name in store.names():
        store.initialize(name)


def load(path: str | os.PathLike[str], session: Session | None = None) -> None:
    """Every variable from ``<path>/<name>/out``; a missing file is reported and initialized (legacy)."""
    session = _session(session)
    prepare(session)
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise CheckpointError(f"checkpoint folder {root!r} does not exist")
    store = session.variables
    values: dict[str, np.ndarray] = {}
    missing: list[tuple[str, str]] = []
    for name in store.names():
        spec = store[name].spec
        folder = variable_dir(root, name)
        out = os.path.join(folder, OUT_FILE)
        if not os.path.isfile(out):
            missing.append((name, out))
            continue
        meta = os.path.join(folder, META_FILE)
        if os.path.isfile(meta):
            with open(meta, encoding="utf-8") as f:
                found = parse_meta(f.read(), meta)
            if found != spec:
                raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: this session has {_describe(spec)}, "
                                      f"the checkpoint's meta says {_describe(found)} ({meta})")
        size = os.path.getsize(out)
        if size != spec.nbytes:
            raise CheckpointError(f"checkpoint {root!r}, variable {name!r}: {out} has {size} bytes, expected "
                                  f"{spec.nbytes} for {_describe(spec)}")
    absent = {name for name, _ in missing}
    for name in store.names():  # every file checked: now read them all, then assign
        if name not in absent:
            values[name] = _read_checked(os.path.join(variable_dir(root, name), OUT_FILE), store[name].spec,
                                         name, root)
    for name, value in values.items():
        store.assign(name, value)
    for name, out in missing:
        print(f"WARNING! CANNOT find variable path in : {out}. It will be initialized.")
        store.initialize(name)


class CheckPoint:
    """``flow.train.CheckPoint()``: ``init()``, ``save(path)``, ``load(path)`` for every variable of the session.

    Each first finishes the steps already launched; ``init`` and ``load`` also trace and plan
    every defined job, so its variables exist.
    """

    def __init__(self, session: Session | None = None) -> None:
        self._session = session

    def init(self) -> None:
        initialize(self._session)

    def save(self, path: str | os.PathLike[str]) -> None:
        save(path, self._session)

    def load(self, path: str | os.PathLike[str]) -> None:
        load(path, self._session)


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


__all__ = ["CheckPoint", "SimpleCheckPointManager", "get", "load_variables", "save"]
