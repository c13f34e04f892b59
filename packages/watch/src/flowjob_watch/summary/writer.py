"""Event-file writers, one per log folder, shared by every summary op and TensorBoard sink in the process.

Legacy OneFlow kept one summary writer per process: a job running ``create_summary_writer(logdir)``
opened it, every ``summary.*`` op of any job wrote to it, ``flush_summary_writer`` flushed it. The
*current* writer here is that one. Sinks given their own folder get a writer of that folder; two
users of one folder share one writer (so one event file, not two racing ones). The files are
TensorBoard event files, written with tensorboardX's record writer and protos; every writer is closed at exit
(the exit handler is registered with the first writer, not at import).
"""
from __future__ import annotations

import atexit
import functools
import itertools
import os
import tempfile
import threading
import time
from typing import Any

from flowjob_core import FlowjobError, MissingPackageError
from flowjob_core.runtime.session import finish_all_sessions

_lock = threading.Lock()
_writers: dict[str, Any] = {}  # absolute log folder -> EventWriter
_current: str | None = None
_exit_handler_registered = False
_serial = itertools.count()


class NoSummaryWriterError(FlowjobError, RuntimeError):
    """A summary op ran before any job opened a writer with ``flow.summary.create_summary_writer``."""


@functools.cache
def summary_writer_class() -> Any:
    """The event-file writer class; summary calls ask for it while tracing, so a missing tensorboardX is
    named there and its import (which loads torch when that is installed) never runs on the step thread."""
    try:
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto import event_pb2
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("tensorboardX", "google"):
            raise MissingPackageError("flow.summary and the tensorboard watch sink write TensorBoard event files "
                                      "with tensorboardX, which is not installed: pip install tensorboardX") from None
        raise

    class EventWriter:
        """One event file, written synchronously: each summary is on disk (flushed) when ``add_summary``
        returns, so TensorBoard beside the training sees it and a crash loses nothing written."""

        def __init__(self, logdir: str) -> None:
            os.makedirs(logdir, exist_ok=True)
            # the pid and a count keep two writers of one folder in one second from sharing a file name
            suffix = f".{os.getpid()}.{next(_serial)}"
            self.logdir = logdir
            self._events = EventsWriter(os.path.join(logdir, "events"), suffix)
            self.path: str = self._events._file_name
            self._lock = threading.Lock()

        def add_summary(self, summary: Any, step: int) -> None:
            event = event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)
            with self._lock:
                self._events.write_event(event)
                self._events.flush()

        def flush(self) -> None:
            with self._lock:
                self._events.flush()

        def close(self) -> None:
            with self._lock:
                self._events.close()

    return EventWriter


def _key(logdir: str | os.PathLike[str]) -> str:
    if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise FlowjobError(f"a summary log folder must be a non-empty path, got {logdir!r}")
    return os.path.abspath(os.fspath(logdir))


def _unwritable(key: str, exc: OSError) -> FlowjobError:
    return FlowjobError(f"the summary log folder {key!r} cannot be written: {exc.strerror or exc}"
                        f"{f' ({exc.filename})' if exc.filename and exc.filename != key else ''}")


def check_folder(logdir: str | os.PathLike[str]) -> None:
    """Make ``logdir`` if missing and try writing a file in it, so a folder that cannot take event files
    (a read-only file system, a file in the way) is an error naming it where the job is defined, not in a
    step nobody waits for."""
    key = _key(logdir)
    try:
        os.makedirs(key, exist_ok=True)
        with tempfile.TemporaryFile(dir=key):
            pass
    except OSError as exc:
        raise _unwritable(key, exc) from None


def writer_for(logdir: str | os.PathLike[str]) -> Any:
    """The writer of ``logdir`` (opened on first use; the folder is made if missing)."""
    key = _key(logdir)
    with _lock:
        writer = _writers.get(key)
        if writer is None:
            try:
                writer = summary_writer_class()(key)
            except OSError as exc:
                raise _unwritable(key, exc) from None
            _writers[key] = writer
            _register_exit_handler()
        return writer


def open_current(logdir: str | os.PathLike[str]) -> Any:
    """What running ``create_summary_writer(logdir)`` does: ``logdir``'s writer becomes the current one."""
    global _current
    writer = writer_for(logdir)
    with _lock:
        _current = _key(logdir)
    return writer


def current(what: str) -> Any:
    """The current writer, or ``NoSummaryWriterError`` naming ``what`` wanted it."""
    with _lock:
        writer = _writers.get(_current) if _current is not None else None
    if writer is None:
        raise NoSummaryWriterError(f"{what}: no summary writer is open; run a job calling "
                                   f"flow.summary.create_summary_writer(logdir) first")
    return writer


def current_logdir() -> str | None:
    """The folder of the current writer (None before ``create_summary_writer`` ran)."""
    return _current


def flush(logdir: str | os.PathLike[str] | None = None) -> None:
    """Flush one folder's writer, or every open writer when ``logdir`` is None."""
    with _lock:
        writers = list(_writers.values()) if logdir is None else [_writers[k] for k in [_key(logdir)] if k in _writers]
    for writer in writers:
        writer.flush()


def close_all() -> None:
    """Flush and close every writer (at exit; tests use it to start from none)."""
    global _current
    with _lock:
        writers = list(_writers.values())
        _writers.clear()
        _current = None
    for writer in writers:
        writer.close()


def _register_exit_handler() -> None:
    """Register ``_close_at_exit`` once, with the first writer rather than at import (called under ``_lock``)."""
    global _exit_handler_registered
    if not _exit_handler_registered:
        atexit.register(_close_at_exit)
        _exit_handler_registered = True


def _close_at_exit() -> None:
    # steps launched asynchronously just before the program ended may still write summaries, so the
    # sessions finish them first (their own exit handler, registered before this one, runs after it); then
    # the queue of tensorboardX's writer thread reaches the file before the process ends
    finish_all_sessions()
    close_all()
