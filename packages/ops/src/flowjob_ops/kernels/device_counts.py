"""Counts a kernel keeps in device memory (bad labels, out-of-range indices) and reports once, without reading
the device back every step.

On a device backend a kernel that branched on a value read back each step would make the host wait for the
device, and a step recorded as CUDA graphs could not hold it. Such a kernel instead does the same work every step
(it masks what the bad values touch), adds the step's count to a ``DeviceCount`` on the device, and reports the
count when a read finds it grown: once (a warning), or at every growth (``once=False``: an error, raised by the
call that reads it). Who reads it: the plan's driver, where one takes the counts over
(``driven``: the gpu backend's recorded steps copy them to pinned host memory after a step and read them at a later
call, never waiting for the device); else the kernel itself after each call (a read back: debug mode, recording
off, a kernel called outside a plan). The counts register in the plan's shared dict (``Plan.shared``) under
``DEVICE_COUNTS``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

DEVICE_COUNTS = "device counts"
"""The key of the plan's ``DeviceCount`` list in ``KernelContext.shared`` (``Plan.shared``)."""


class DeviceCount:
    """An int64 count on the device, reported (``report(new)``, ``new`` what it grew by since the last report) when a
    read finds it grown: the first time only (``once``), or every time (a ``report`` that raises)."""

    def __init__(self, ctx: Any, report: Callable[[int], None], *, once: bool = True) -> None:
        self.xp = ctx.xp
        self.count = ctx.workspace((1,), np.int64)
        self.count.fill(0)
        self.driven = False  # a step driver reads it (``seen``); else ``check`` reads it back after each call
        self.once = once
        self.node, self.op = ctx.node_name, ctx.op
        self.reported = 0  # the count at the last report
        self._report = report
        ctx.shared.setdefault(DEVICE_COUNTS, []).append(self)

    @property
    def settled(self) -> bool:
        """Nothing more to read: reported once, and once is all."""
        return self.once and self.reported > 0

    def add(self, flags: Any) -> None:
        """Add the number of true ``flags`` (a device array), on the device."""
        self.xp.add(self.count, self.xp.count_nonzero(flags), out=self.count)

    def add_counts(self, counts: Any) -> None:
        """Add a device array of counts (a kernel that counted them itself), on the device."""
        self.xp.add(self.count, counts.sum(), out=self.count)

    def check(self) -> None:
        """After the kernel's call: where no driver reads the count, read it back now."""
        if not (self.driven or self.settled):
            self.seen(int(self.count[0]))

    def seen(self, value: int) -> None:
        """The count as read (now, or copied after an earlier step): reported where it grew (once: the first time)."""
        if value > self.reported and not self.settled:
            new, self.reported = int(value) - self.reported, int(value)
            self._report(new)
