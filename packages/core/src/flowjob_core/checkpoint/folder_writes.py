"""Writing a checkpoint folder: its files (fsynced), its parent folders, whether the target may be written, and an
OS error said in terms of the checkpoint's folder (shared by the save of one process, ``save_load``, and the save of
split variables on several ranks, ``split_files``)."""
from __future__ import annotations

import errno
import os

import numpy as np

from flowjob_core.checkpoint import atomic_replace
from flowjob_core.checkpoint.layout import DONE_FILE
from flowjob_core.errors import CheckpointError


def write_file(path: str, data: bytes | np.ndarray) -> None:
    with open(path, "wb") as f:
        # through the file object, not ndarray.tofile: a full disk is then OSError(ENOSPC), where tofile
        # says only "40000 requested and 8192 written"
        f.write(np.ascontiguousarray(data).data.cast("B") if isinstance(data, np.ndarray) else data)
        f.flush()
        os.fsync(f.fileno())


def check_target(path: str, overwrite: bool) -> None:
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
    if not atomic_replace.is_complete(path):  # never replace a folder the user keeps other things in
        raise CheckpointError(f"cannot save a checkpoint to {path!r} with overwrite=True: the folder is not a "
                              f"checkpoint (no {DONE_FILE!r} file), so it is not replaced")


def make_parent(parent: str, path: str) -> None:
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


def why(exc: OSError, parent: str) -> str:
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


__all__ = ["check_target", "make_parent", "why", "write_file"]
