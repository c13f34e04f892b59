"""The hidden files beside a checkpoint while it is saved, the atomic swap that replaces one,
and the removal of what killed saves left behind.

A save of ``<dir>/<name>`` uses hidden folders in ``<dir>`` named by a token ``T`` that records
the writer: ``<random>-<pid>-<process start time>-<host hash>``. The record is in the name, so
it exists exactly as long as the folder (a file written inside or beside could be caught half
written by a kill):

- ``.<name>.T.tmp``: the new checkpoint, written and fsynced before it is swapped in;
- ``.<name>.T.old``: only on the fallback swap, the old checkpoint between two renames.

The swap: on Linux one ``renameat2(RENAME_EXCHANGE)`` exchanges the new and the old folder, so
``<dir>/<name>`` is at every instant the old or the new complete checkpoint. Where exchange is
not available (other systems, file systems without it) the old folder is renamed aside to
``.old`` and the new one renamed in: a kill between the two renames leaves ``<name>`` missing
for a moment, and the next save or load in ``<dir>`` renames the complete ``.tmp`` (else the
``.old``) back to ``<name>`` (``recover``); a load running meanwhile reads the ``.old``.

Stale folders: a save or load in ``<dir>`` removes those whose writer process is gone (same
host, and its pid is dead or now names a process started at another time), logging each on
the ``flowjob.checkpoint`` logger. Folders of another host or of a live writer are left
alone, and so are hidden ``.tmp`` folders without a token (older flowjob versions; reported once).
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import socket
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from flowjob_core.checkpoint.layout import DONE_FILE

logger = logging.getLogger("flowjob.checkpoint")

_GROUP = re.compile(r"\.(?P<name>.+)\.(?P<token>[0-9a-f]{8}-(?P<pid>\d+)-(?P<start>\d+)-(?P<host>[0-9a-f]{8}))"
                    r"\.(?P<kind>tmp|old)")
_LEFTOVER_TMP = re.compile(r"\.(?P<name>.+)\.[^.]+\.tmp")
_reported_unknown: set[str] = set()


def is_complete(folder: str) -> bool:
    """A checkpoint folder whose save finished: ``snapshot_done`` is written last."""
    return os.path.isdir(folder) and not os.path.islink(folder) and os.path.isfile(os.path.join(folder, DONE_FILE))


def fsync_dir(path: str) -> None:
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


# the writer's identity ----------------------------------------------------
def _start_time(pid: int) -> int:
    """The process start time (clock ticks since boot, Linux ``/proc``; 0 elsewhere), which tells a
    reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return 0
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else 0  # field 22 of proc(5)


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _writer_gone(pid: int, start: int, host: str) -> bool:
    """True only when the writer is known to have exited: same host, pid dead or reused."""
    if host != _host() or os.name == "nt" or pid <= 0:  # os.kill would terminate on Windows
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    now = _start_time(pid)
    return start != 0 and now != 0 and now != start


@dataclass
class Group:
    """The hidden folders of one save of ``<folder>/<name>``."""

    folder: str
    name: str
    token: str

    def path(self, kind: str) -> str:
        return os.path.join(self.folder, f".{self.name}.{self.token}.{kind}")

    @property
    def target(self) -> str:
        return os.path.join(self.folder, self.name)


def begin(target: str) -> Group:
    """Create the empty ``.tmp`` folder of a save of ``target`` (whose parent exists)."""
    folder, name = os.path.split(os.path.abspath(target))
    pid = os.getpid()
    while True:
        group = Group(folder, name, f"{secrets.token_hex(4)}-{pid}-{_start_time(pid)}-{_host()}")
        try:
            os.mkdir(group.path("tmp"))
        except FileExistsError:
            continue
        return group


def finish(group: Group) -> None:
    """Remove what is left of a save: its ``.tmp`` (unfinished, or the old checkpoint after an
    exchange) and its ``.old``."""
    for kind in ("tmp", "old"):
        path = group.path(kind)
        if os.path.isfile(path) or os.path.islink(path):  # a small file's (write_small_file)
            try:
                os.remove(path)
            except FileNotFoundError:  # another process removed it first
                pass
        else:
            shutil.rmtree(path, ignore_errors=True)
    fsync_dir(group.folder)


# the swap -----------------------------------------------------------------
@lru_cache(maxsize=1)
def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it (glibc < 2.28, some musl)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: str, b: str) -> bool:
    """Swap two existing folders atomically; False where the system or file system cannot."""
    fn = _renameat2()
    if fn is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), b)


def swap_in(group: Group) -> None:
    """Put the complete ``.tmp`` of ``group`` at its target: absent, an empty folder or a checkpoint.

    Afterwards the ``.tmp`` (exchanged) or ``.old`` (fallback) holds the old one; ``finish`` removes it.
    """
    tmp, target = group.path("tmp"), group.target
    if not os.path.lexists(target) or (os.path.isdir(target) and not os.listdir(target)):
        try:
            os.replace(tmp, target)  # POSIX: replaces an empty folder atomically
        except OSError:
            if os.name != "nt" or not os.path.isdir(target) or os.listdir(target):
                raise
            os.rmdir(target)
            os.replace(tmp, target)
        return
    if exchange(tmp, target):
        return
    old = group.path("old")
    os.replace(target, old)
    fsync_dir(group.folder)
    try:
        os.replace(tmp, target)
    except BaseException:  # an error (not a kill) between the renames: put the old one back
        if not os.path.lexists(target):
            os.replace(old, target)
        raise


# stale folders -----------------------------------------------------------
def _size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def recover(group: Group) -> None:
    """A dead writer's target is missing: rename its complete new checkpoint, else the old one, back."""
    if os.path.lexists(group.target):
        return
    for kind in ("tmp", "old"):
        candidate = group.path(kind)
        if is_complete(candidate):
            try:
                os.replace(candidate, group.target)
            except OSError:  # another process recovered it first
                return
            fsync_dir(group.folder)
            logger.warning("checkpoint %s was missing (its save, pid %s, was killed while swapping); "
                           "restored the complete %s checkpoint", group.target, group.token.split("-")[1],
                           "new" if kind == "tmp" else "old")
            return


def remove_stale(folder: str) -> None:
    """Recover and remove the hidden folders in ``folder`` whose writer is gone; report unknown ones once."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    groups: dict[tuple[str, str], Group] = {}
    for entry in entries:
        match = _GROUP.fullmatch(entry)
        if match is not None:
            if _writer_gone(int(match["pid"]), int(match["start"]), match["host"]):
                groups.setdefault((match["name"], match["token"]), Group(folder, match["name"], match["token"]))
            continue
        path = os.path.join(folder, entry)
        if _LEFTOVER_TMP.fullmatch(entry) and path not in _reported_unknown and os.path.isdir(path):
            _reported_unknown.add(path)
            logger.warning("%s looks like the folder of an interrupted checkpoint save but does not say which "
                           "process wrote it (an older flowjob?); not removed: delete it if no save is running "
                           "there", path)
    for group in groups.values():
        recover(group)
        leftovers = [group.path(k) for k in ("tmp", "old") if os.path.lexists(group.path(k))]
        if not leftovers:  # another process cleaned it meanwhile
            continue
        freed = sum(_size(p) for p in leftovers)
        finish(group)
        logger.warning("removed what an interrupted checkpoint save of %s left: %s (%d bytes); its writer, pid "
                       "%s, is gone", group.target, ", ".join(os.path.basename(p) for p in leftovers), freed,
                       group.token.split("-")[1])


def reading_path(target: str) -> str:
    """Where to read ``target``: itself, or while a live writer is between its two renames, its ``.old``."""
    if os.path.lexists(target):
        return target
    folder, name = os.path.split(os.path.abspath(target))
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return target
    for entry in entries:
        match = _GROUP.fullmatch(entry)
        if match is not None and match["name"] == name and match["kind"] == "old":
            if is_complete(os.path.join(folder, entry)):
                return os.path.join(folder, entry)
    return target


def write_small_file(path: str, data: bytes) -> None:
    """Replace a small file atomically (the manager's ``latest`` pointer): write a ``.tmp`` beside
    it (named like a save's, so a killed writer's is removed the same way), fsync, rename."""
    folder, name = os.path.split(os.path.abspath(path))
    pid = os.getpid()
    while True:
        tmp = Group(folder, name, f"{secrets.token_hex(4)}-{pid}-{_start_time(pid)}-{_host()}").path("tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        break
    try:
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(folder)
