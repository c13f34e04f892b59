"""Class labels outside [0, C) in the sparse losses: legacy's split-class semantics.

Legacy OneFlow splits the class axis across devices and gives every device its range of
classes; a label outside a device's range contributes nothing there. On one device that
range is [0, C), so a label outside it (negative, or C and above) adds zero loss and zero
gradient: it never wraps around like a numpy index and never raises. The legacy documents'
own programs feed labels in [-10, 10) with 10 classes and rely on this.

Cost per step, when every label is in range: one comparison of the N labels read as unsigned
integers (a negative label reads as a huge one, so ``>= C`` catches both sides) and an ``any``.
Only a batch holding bad labels pays for clipping and a mask. The forward node warns once per
plan (the flag lives in the kernel closure) with the op and the count; its gradient node reuses
the forward's split of the same step through the plan's shared kernel dict.

On a backend that records its steps (CUDA graphs) the ``any`` would be a read back every step, which a recorded
step cannot hold: there every step clips and masks, and the forward node counts the bad labels on the device
(``device_counts.DeviceCount``), warning once when a read finds the count non-zero.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from flowjob_core import KernelContext

from flowjob_ops.kernels.device_counts import DeviceCount

SHARED_KEY = "class-labels"


class ClassLabels:
    """Per node: each step's labels split into indices safe to use and a mask of those in range."""

    def __init__(self, ctx: KernelContext, rows: int, classes: int, *, warn: bool) -> None:
        dtype = np.dtype(ctx.inputs[0].dtype)
        self.xp = ctx.xp
        self.rows = rows
        self.classes = classes
        self.unsigned = np.dtype(f"u{dtype.itemsize}")
        self.bad = ctx.workspace((rows,), bool)
        self.safe = ctx.workspace((rows,), dtype)
        self.valid = ctx.workspace((rows,), bool)
        self.last: tuple[Any, Any] = (None, None)
        self._what = f"op {ctx.node_name!r} ({ctx.op})"
        self._warned = not warn
        self.device: DeviceCount | None = None  # on a recording backend: no read back, the count on the device
        # a backend recording its steps (CUDA graphs) cannot hold a read back: there the count stays on the device
        self._on_device = getattr(ctx.backend, "step_recorder", None) is not None
        if self._on_device and warn:
            self.device = DeviceCount(ctx, self._warn_counted)

    def publish(self, ctx: KernelContext) -> "ClassLabels":
        """Offer this step's split to the node's gradient (see :func:`of_forward`)."""
        ctx.shared[(SHARED_KEY, ctx.node_name)] = self
        return self

    def split(self, labels: Any) -> tuple[Any, Any]:
        """(indices, mask): the labels themselves and ``None`` when all lie in [0, C); else the labels
        clipped into range and the mask of those that were already there."""
        xp, lab = self.xp, labels.reshape(self.rows)
        xp.greater_equal(lab.view(self.unsigned), self.classes, out=self.bad)
        if self._on_device:  # the same work every step, nothing read back
            xp.clip(lab, 0, self.classes - 1, out=self.safe)
            xp.logical_not(self.bad, out=self.valid)
            if self.device is not None:
                self.device.add(self.bad)
                self.device.check()
            self.last = (self.safe, self.valid)
            return self.last
        if not self.bad.any():
            self.last = (lab, None)
            return self.last
        xp.clip(lab, 0, self.classes - 1, out=self.safe)
        xp.logical_not(self.bad, out=self.valid)
        if not self._warned:
            self._warned = True
            count = int(xp.count_nonzero(self.bad))
            warnings.warn(
                f"{self._what}: {count} of {self.rows} labels lie outside the class range [0, {self.classes}); "
                f"they add zero loss and zero gradient (legacy's split-class semantics); said once per op and job",
                RuntimeWarning, stacklevel=2)
        self.last = (self.safe, self.valid)
        return self.last

    def _warn_counted(self, count: int) -> None:
        warnings.warn(counted_message(self._what, count, self.rows, self.classes), RuntimeWarning, stacklevel=2)


def counted_message(what: str, count: int, rows: int, classes: int) -> str:
    """The warning of a count of bad labels kept on the device: read after one step (``count <= rows``, as every
    read back is) or after several (a read that waited for no step)."""
    counted = f"{count} of {rows} labels" if count <= rows else f"{count} labels over several steps ({rows} a step)"
    return (f"{what}: {counted} lie outside the class range [0, {classes}), counted on the device; they add zero "
            f"loss and zero gradient (legacy's split-class semantics); said once per op and job")


def of_forward(ctx: KernelContext) -> ClassLabels | None:
    """The forward node's split a gradient node may reuse (its ``forward`` attribute names the node); None
    for a gradient node built without its forward (it then splits the labels itself)."""
    found = ctx.shared.get((SHARED_KEY, ctx.attrs.get("forward")))
    return found if isinstance(found, ClassLabels) else None
