"""The device counts of a plan's kernels (``flowjob_ops.kernels.device_counts``: bad labels, indices out of range)
read by the gpu backend's step without the host waiting for the device.

After a call of the step, the counts still read (a warning's until it is given, an error's always) are gathered into
one device array and copied, asynchronously, into pinned host memory on the step's stream; an event marks the copy.
The host reads that memory once the event has passed: at once where the device is already done (always on the
emulated CuPy), else at a later call. So a recorded step reads nothing back and never synchronizes, at the cost of
one small copy per call and of a report (a warning, or an error raised by the call that reads it) that may come a
call after the step that made it. The warm-up call, which waits for the device anyway, reads them back at once.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from flowjob_core.plan.planner import StepError
from flowjob_ops.kernels.device_counts import DEVICE_COUNTS
from flowjob_gpu.emulation.factory import emulated_cupyx
from flowjob_gpu.emulation.modules import EmulatedModule


def pinned_zeros(cp: Any, size: int, dtype: Any) -> Any:
    """A host array in page-locked memory (CuPy's ``cupyx.zeros_pinned``; the emulated CuPy's is a numpy array)."""
    cupyx = emulated_cupyx() if isinstance(cp, EmulatedModule) else importlib.import_module("cupyx")
    return cupyx.zeros_pinned((size,), dtype)


class CountReads:
    """The counts the kernels of ``plan`` registered, taken over: ``after_call`` reads them without waiting."""

    def __init__(self, cp: Any, plan: Any) -> None:
        self.cp = cp
        self.job = plan.job.name
        self.counts = list(getattr(plan, "shared", {}).get(DEVICE_COUNTS, ()))
        for count in self.counts:
            count.driven = True
        self.gathered = self.host = self.copied = None
        self.copying = False

    def after_call(self, stream: Any, *, wait: bool = False) -> None:
        """On the host after a call of the step (its work queued on ``stream``); ``wait``: read the counts back now.
        A count's report may raise (an error the count stands for): after every count is read."""
        if all(count.settled for count in self.counts):
            return
        if wait:
            self._seen([int(count.count[0]) for count in self.counts])
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
            self._seen(self.host.tolist())

    def _seen(self, values: list[int]) -> None:
        failure = None
        for count, value in zip(self.counts, values):
            try:
                count.seen(value)
            except Exception as exc:  # the first error is raised once every count has been read, as the step's
                failure = failure or StepError(f"job {self.job!r}, op {count.node!r} ({count.op}): kernel failed "
                                               f"(its count on the device, read after the call): {exc!r}")
                failure.__cause__ = exc
        if failure is not None:
            raise failure
