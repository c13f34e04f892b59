"""The run's log file, as legacy ``flow.env.log_dir`` made one (glog's layout, Python logging).

Each run writes ``oneflow.<host>.<user>.log.INFO.<yyyymmdd-hhmmss>.<pid>`` in the folder and points the
link ``oneflow.INFO`` at it; the link is replaced by a rename, so a reader following it never finds
it missing or half-made. The file gets the ``flowjob`` loggers' records from INFO on. What reaches
the program's own handlers (the console, pytest's capture) is unchanged: records below the level
the ``flowjob`` logger had before go to the file only, as glog kept INFO out of stderr.
"""
from __future__ import annotations

import getpass
import logging
import os
import socket
import sys
import threading
import time

from flowjob_core.errors import ConfigError

FORMAT = "%(levelname).1s%(asctime)s.%(msecs)03d %(process)d %(name)s] %(message)s"
DATEFMT = "%m%d %H:%M:%S"

_lock = threading.Lock()
_state: dict[str, object] = {}


class _Forward(logging.Handler):
    """Passes on to the root logger's handlers what the ``flowjob`` logger would have passed before."""

    def __init__(self, level_before: int) -> None:
        super().__init__()
        self.level_before = level_before

    def emit(self, record: logging.LogRecord) -> None:
        threshold = self.level_before or logging.getLogger().getEffectiveLevel()
        if record.levelno >= threshold:
            logging.getLogger().handle(record)


def _file_name() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (containers)
        user = str(os.getuid())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"oneflow.{socket.gethostname()}.{user}.log.INFO.{stamp}.{os.getpid()}"


def _point_link(folder: str, name: str) -> None:
    link = os.path.join(folder, "oneflow.INFO")
    tmp = os.path.join(folder, f".oneflow.INFO.{os.getpid()}.tmp")
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(name, tmp)
        os.replace(tmp, link)
    except OSError:  # a file system without links: the file itself is still written
        if os.path.lexists(tmp):
            os.unlink(tmp)


def open_run_log(folder: str) -> str:
    """Start writing the run's log in ``folder`` (created); returns the file's path."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"flow.env.log_dir({folder!r}): cannot create the folder: {exc}") from None
    name = _file_name()
    path = os.path.join(folder, name)
    try:
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"flow.env.log_dir({folder!r}): cannot write the log file {path}: {exc}") from None
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
    _point_link(folder, name)
    root = logging.getLogger("flowjob")
    with _lock:
        _close_locked()
        level_before, propagate_before = root.level, root.propagate
        forward = _Forward(level_before)
        if propagate_before:
            root.addHandler(forward)
        root.addHandler(handler)
        if root.getEffectiveLevel() > logging.INFO:
            root.setLevel(logging.INFO)
        root.propagate = False  # the forwarder passes on what propagated before
        _state.update(handler=handler, forward=forward, level=level_before, propagate=propagate_before,
                      path=path)
    logging.getLogger("flowjob.env").info("run log of pid %d on %s: %s", os.getpid(), socket.gethostname(),
                                          " ".join([sys.executable, *sys.argv]))
    return path


def current_path() -> str | None:
    """The file the run's log goes to, or None when ``log_dir`` was not called."""
    with _lock:
        path = _state.get("path")
    return path if isinstance(path, str) else None


def _close_locked() -> None:
    if not _state:
        return
    root = logging.getLogger("flowjob")
    handler, forward = _state["handler"], _state["forward"]
    assert isinstance(handler, logging.Handler) and isinstance(forward, logging.Handler)
    root.removeHandler(handler)
    root.removeHandler(forward)
    handler.close()
    level, propagate = _state["level"], _state["propagate"]
    assert isinstance(level, int)
    root.setLevel(level)
    root.propagate = bool(propagate)
    _state.clear()


def close_run_log() -> None:
    """Stop writing the run's log and give the ``flowjob`` logger back its earlier level and propagation."""
    with _lock:
        _close_locked()
