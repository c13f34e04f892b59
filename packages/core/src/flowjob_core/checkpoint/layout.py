"""The checkpoint folder's layout, as legacy OneFlow wrote it.

A checkpoint is a folder: per variable ``<path>/<name>/out`` (the raw bytes of the whole
array, C order, native dtype, no header) and ``<path>/<name>/meta`` (text protobuf:
``shape { dim: ... }`` and ``data_type: kFloat``), plus an empty ``<path>/snapshot_done``
written last. A name with ``/`` is a nested folder. A variable folder or ``out`` file that is a
symbolic link is read through it, by every reader alike (``stored_names``), as legacy did.

Who wrote a folder: a flowjob save (and OneFlow's own) writes a ``meta`` beside every ``out`` and
``snapshot_done`` last, so a folder with ``meta`` files and no ``snapshot_done`` is a save or a copy
that did not finish. A folder of bare ``<name>/out`` files, no ``meta`` anywhere, is what another
program wrote (one that prunes or converts a model writes each array with numpy's ``tofile``):
legacy loaded it, and so does ``flow.train.CheckPoint().load``, with a warning (``save_load``).
"""
from __future__ import annotations

import os
import re

import numpy as np

from flowjob_core.errors import CheckpointError
from flowjob_core.ir import dtypes
from flowjob_core.ir.job import BlobSpec

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


def read_meta(meta: str) -> BlobSpec:
    """A ``meta`` file's spec; bytes that are not text are a ``CheckpointError`` naming the file."""
    with open(meta, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{meta}: not a variable meta (not UTF-8 text: {exc.reason} at byte {exc.start}); "
                              f"the checkpoint is damaged or not a flowjob/OneFlow checkpoint") from None
    return parse_meta(text, meta)


def describe(spec: BlobSpec) -> str:
    return f"shape {spec.shape} {spec.dtype} ({spec.nbytes} bytes)"


def stored_names(root: str) -> list[str]:
    """Names of the variables stored in a checkpoint folder (folders holding an ``out`` file), hidden
    entries left out. Folders and ``out`` files reached through a symbolic link count like any other, as
    legacy's ``flow.checkpoint.get`` and ``CheckPoint().load`` both read them; a link back to a folder
    that holds it is not followed (it would never end)."""
    names: list[str] = []

    def visit(folder: str, name: str, ancestors: frozenset[str]) -> None:
        if name and os.path.isfile(os.path.join(folder, OUT_FILE)):
            names.append(name)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:  # unreadable: its variables are reported missing by name
            return
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            real = os.path.realpath(entry.path)
            if real not in ancestors:
                visit(entry.path, f"{name}/{entry.name}" if name else entry.name, ancestors | {real})

    visit(root, "", frozenset({os.path.realpath(root)}))
    return sorted(names)


def is_foreign(root: str, names: list[str]) -> bool:
    """Whether the variables ``names`` of the folder ``root`` are bare ``out`` files, without the ``meta`` a
    flowjob or OneFlow save writes beside each: a folder another program wrote."""
    return not any(os.path.isfile(os.path.join(root, *name.split("/"), META_FILE)) for name in names)
