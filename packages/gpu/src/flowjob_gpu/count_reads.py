"""The device counts of a plan's kernels (``flowjob_ops.kernels.device_counts``: bad labels, indices out of range)
read by the gpu backend's step without the host waiting for the device.

After a call of the step, the counts not yet reported are gathered into one device array and copied, asynchronously,
into pinned host memory on the step's stream; an event marks the copy. The host reads that memory once the event has
passed: at once where the device is already done (always on the emulated CuPy), else at a later call. So a recorded
step reads nothing back and never synchronizes, at the cost of one small copy per call until every count has
reported (a count is reported once) and a warning that may come a call late.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from flowjob_ops.kernels.device_counts import DEVICE_COUNTS


def pinned_zeros(cp: Any, size: int, dtype: Any) -> Any:
    """A host array in page-locked memory (CuPy's ``cupyx.zeros_pinned``; the emulated CuPy's is a numpy array)."""
    from flowjob_gpu.emulation.modules import EmulatedModule
    name = "flowjob_gpu.emulation.cupyx" if isinstance(cp, EmulatedModule) else "cupyx"
    return importlib.import_module(name).zeros_pinned((size,), dtype)


class CountReads:
    """The counts the kernels of ``plan`` registered, taken over: ``after_call`` reads them without waiting."""

    def __init__(self, cp: Any, plan: Any) -> None:
        self.cp = cp
        self.counts = list(getattr(plan, "shared", {}).get(DEVICE_COUNTS, ()))
        for count in self.counts:
            count.driven = True
        self.gathered = self.host = self.copied = None
        self.copying = False

    def after_call(self, stream: Any) -> None:
        """On the host after a call of the step (its work queued on ``stream``)."""
        if all(count.reported for count in self.counts):
            return
        cp = self.cp
        if self.gathered is None:  # made on the first call: none for a plan without counts
            self.gathered = cp.zeros(len(self.counts), np.int64)
            self.host = pinned_zeros(cp, len(self.counts), np.int64)
            self.copied = cp.cuda.Event(disable_timing=True)
        if not self.copying:
            for slot, count in enumerate(self.counts):
                cp.copyto(self.gathered[slot:slot + 1], count.count)
            self.gathered.get(stream=stream, out=self.host, blocking=False)
            self.copied.record(stream)
            self.copying = True
        if self.copied.done:  # the copy has landed (a query: the host does not wait)
            self.copying = False
            for count, value in zip(self.counts, self.host.tolist()):
                count.seen(value)
