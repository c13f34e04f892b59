"""Counts of the host traffic the emulated device sees: synchronizations and copies between host and device.

A GPU step that replays as CUDA graphs should wait for the device and copy to or from the host as rarely as it
can; on the emulation every such operation passes one of a few gates (``cuda.refuse_during_capture``, which
every host read and synchronization calls, and the host-data paths of ``cupy.array``/``cupy.asarray``), and each
gate notes it here while a ``counting()`` block is open. Outside one, noting costs a list lookup.

- a *synchronization* is anything that makes the host wait for the device: ``Stream.synchronize``,
  ``Device.synchronize``, ``deviceSynchronize``, a device-to-host read (``get``, ``float(a)``, ``item``, ...) and a
  function whose result's size CuPy reads back (``nonzero``);
- a *copy* is a transfer either way: the reads above (a sync too), host data made into a device array and an
  asynchronous copy into pinned host memory (``get(out=..., blocking=False)``, no sync).
"""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import Iterator

SYNC_ONLY = ("synchronize", "Stream.done")  # waits, no data moved
TO_DEVICE = ("cupy.array of host data", "cupy.asarray of host data", "cupy.ndarray.set()")  # copies, no wait
ASYNC_TO_HOST = ("cupy.ndarray.get(blocking=False)",)  # a copy into pinned host memory the host does not wait for


class HostTraffic:
    """What was noted while a ``counting()`` block was open: totals and each operation by name."""

    def __init__(self) -> None:
        self.syncs = 0
        self.copies = 0
        self.operations: Counter[str] = Counter()

    def note(self, what: str) -> None:
        self.operations[what] += 1
        if what.startswith(TO_DEVICE + ASYNC_TO_HOST):
            self.copies += 1
        elif any(part in what for part in SYNC_ONLY):
            self.syncs += 1
        else:  # a read back to the host: the host waits for it
            self.syncs += 1
            self.copies += 1


_open: list[HostTraffic] = []  # the counters of the open counting() blocks, innermost last


@contextlib.contextmanager
def counting() -> Iterator[HostTraffic]:
    """Count the emulated device's host traffic inside the block (blocks nest: each counts what happens in it)."""
    traffic = HostTraffic()
    _open.append(traffic)
    try:
        yield traffic
    finally:
        _open.remove(traffic)


def note(what: str) -> None:
    """One host synchronization or transfer named ``what`` happened (the emulation's gates call this)."""
    for traffic in _open:
        traffic.note(what)
