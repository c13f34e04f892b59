"""The ``recorder`` sink: watched values written to disk, one ``.npz`` file per step.

Layout: ``<directory>/step_<n:08d>.npz`` (``n`` counts the files this directory ever got),
holding each recorded value under its label (the lbn, ``<lbn>:diff`` for a gradient) plus
``__job__`` (job name) and ``__step__`` (that job's step number, from 0). Each file is
written to a hidden temporary name and renamed, so after a crash every ``step_*.npz`` is a
complete step: read them with ``read_records(directory)``.

Bounds: ``max_steps`` files and ``max_bytes`` bytes in all. ``on_full="rotate"`` (default)
deletes the oldest files to stay within both (the newest file is always kept);
``on_full="stop"`` stops recording at the first step that would cross a bound (a
``RecorderFull`` warning says so once); files already written are kept.
"""
from __future__ import annotations

import collections
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from flowjob_watch.sinks.base import Sink, label, logical

_FILE = re.compile(r"^step_(\d{8,})\.npz$")
DEFAULT_MAX_BYTES = 256 << 20


class RecorderFull(UserWarning):
    """A recorder with ``on_full="stop"`` reached a bound and records no more."""


class Recorder(Sink):
    """Write chosen watched values to ``directory`` once per step (bounded, crash-safe)."""

    def __init__(self, directory: str | os.PathLike[str], *, names: Iterable[str] | None = None, every: int = 1,
                 max_steps: int | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES,
                 on_full: str = "rotate", compress: bool = False) -> None:
        if on_full not in ("rotate", "stop"):
            raise ValueError(f"Recorder: on_full must be 'rotate' or 'stop', got {on_full!r}")
        for bound, value in (("every", every), ("max_steps", max_steps), ("max_bytes", max_bytes)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"Recorder: {bound} must be a positive int or None, got {value!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.names = None if names is None else set(names)
        self.every, self.max_steps, self.max_bytes = every, max_steps, max_bytes
        self.on_full, self.compress = on_full, compress
        self.stopped = False
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, np.ndarray]] = {}  # job -> label -> value of the step under way
        self._job_steps: dict[str, int] = {}
        self._files: collections.deque[tuple[Path, int]] = collections.deque()
        for path in sorted(self.directory.iterdir()):  # resume: count what an earlier run left
            if _FILE.match(path.name):
                self._files.append((path, path.stat().st_size))
        self._next = int(_FILE.match(self._files[-1][0].name).group(1)) + 1 if self._files else 0  # type: ignore[union-attr]

    @property
    def files(self) -> list[Path]:
        """The step files kept now, oldest first."""
        return [p for p, _ in self._files]

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        key = label(blob_def, diff)
        if self.stopped or (self.names is not None and key not in self.names and blob_def.lbn not in self.names):
            return
        with self._lock:
            self._pending.setdefault(blob_def.job_name, {})[key] = np.asarray(logical(value, blob_def))

    def end_step(self, job: str) -> None:
        with self._lock:
            values = self._pending.pop(job, None)
            step = self._job_steps.get(job, 0)
            self._job_steps[job] = step + 1
            if values is None or self.stopped or step % self.every:
                return
            self._write(job, step, values)

    def _write(self, job: str, step: int, values: dict[str, np.ndarray]) -> None:
        final = self.directory / f"step_{self._next:08d}.npz"
        temp = self.directory / f".{final.name}.tmp"
        save = np.savez_compressed if self.compress else np.savez
        with open(temp, "wb") as f:
            save(f, __job__=np.array(job), __step__=np.array(step, np.int64), **values)
        size = temp.stat().st_size
        if self.on_full == "stop" and self._would_overflow(size):
            temp.unlink()
            self.stopped = True
            warnings.warn(f"flowjob Recorder({str(self.directory)!r}) is full (max_steps={self.max_steps}, "
                          f"max_bytes={self.max_bytes}); recording stopped at step {step} of job {job!r}",
                          RecorderFull, stacklevel=2)
            return
        os.replace(temp, final)  # atomic: readers never see half a step
        self._next += 1
        self._files.append((final, size))
        if self.on_full == "rotate":
            while len(self._files) > 1 and self._over_bounds():
                old, _ = self._files.popleft()
                old.unlink(missing_ok=True)

    def _would_overflow(self, size: int) -> bool:
        total = sum(s for _, s in self._files) + size
        return ((self.max_steps is not None and len(self._files) + 1 > self.max_steps)
                or (self.max_bytes is not None and total > self.max_bytes))

    def _over_bounds(self) -> bool:
        return ((self.max_steps is not None and len(self._files) > self.max_steps)
                or (self.max_bytes is not None and sum(s for _, s in self._files) > self.max_bytes))


def read_records(directory: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every complete step in ``directory``, oldest first: ``{"__job__": str, "__step__": int, label: array}``."""
    for path in sorted(Path(directory).iterdir()):
        if not _FILE.match(path.name):
            continue  # temporaries of a step that never finished
        with np.load(path) as data:
            record: dict[str, Any] = {k: data[k] for k in data.files}
        record["__job__"] = str(record["__job__"])
        record["__step__"] = int(record["__step__"])
        yield record


def make_recorder(target: Any = None, **options: Any) -> Recorder:
    """Factory of the ``recorder`` sink: ``target`` (or ``directory=``) is the folder."""
    directory = options.pop("directory", target)
    if directory is None:
        raise TypeError("the recorder sink needs a directory: flow.watch(x, 'runs/x', sink='recorder')")
    return Recorder(directory, **options)
