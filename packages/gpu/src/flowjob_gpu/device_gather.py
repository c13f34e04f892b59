"""The gpu backend's gather and its gradient: indices checked on the device, nothing read back.

The record's kernel on a device backend reads back whether an index lies outside [-size, size) and raises
``IndexError`` as numpy does (a device's take would wrap it around): one synchronization a step, and a node a
recorded step must run live. Here the step goes on without waiting: such an index gathers zeros (legacy's GPU
gather) and passes no gradient, and the indices out of range are counted on the device
(``flowjob_ops.kernels.device_counts``). The count is read after the call, and where it grew the ``IndexError``
naming the op and the count is raised: by that call where the count is read back at once (the warm-up call,
recording off, debug mode, eager), else by the call that reads it (a recorded step reads it without waiting,
``flowjob_gpu.count_reads``: on a device, up to a call later). The step that held them has run: its variable
updates are made, with zeros gathered and nothing scattered back. Indices in [-size, 0) count from the end, as on
the CPU.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from flowjob_core import Kernel, KernelContext
from flowjob_ops.kernels.device_counts import DeviceCount
from flowjob_ops.records.common import normalize_axis
from flowjob_ops.records.indexing import GATHER, GATHER_GRAD


class _Indices:
    """Each call's indices made safe: in [0, size), 0 where out of range, and the mask of those out of range shaped
    to broadcast over the gathered (or scattered) values."""

    def __init__(self, ctx: KernelContext, params_rank: int, axis: int, size: int) -> None:
        spec = ctx.inputs[0] if ctx.op == "gather_grad" else ctx.inputs[1]
        self.xp, self.size = ctx.xp, size
        self.bad = ctx.workspace(spec.shape, bool)
        self.safe = ctx.workspace(spec.shape, spec.dtype)
        self.spread = (1,) * axis + tuple(spec.shape) + (1,) * (params_rank - axis - 1)

    def __call__(self, indices: Any) -> tuple[Any, Any]:
        xp, size, bad, safe = self.xp, self.size, self.bad, self.safe
        xp.logical_or(indices < -size, indices >= size, out=bad)
        xp.add(indices, size, out=safe)  # [-size, 0) counts from the end
        xp.copyto(safe, indices, where=indices >= 0)
        xp.copyto(safe, 0, where=bad)
        return safe, bad.reshape(self.spread)


def gather_kernel(ctx: KernelContext) -> Any:
    """Inputs (params, indices); output params indexed along ``axis``, zeros for indices out of range."""
    xp, out = ctx.xp, ctx.out(0)
    rank = len(ctx.inputs[0].shape)
    axis = normalize_axis(ctx.attrs.get("axis", 0), rank)
    size = ctx.inputs[0].shape[axis]
    indices_of = _Indices(ctx, rank, axis, size)
    per_step = math.prod(ctx.inputs[1].shape)
    what = f"op {ctx.node_name!r} ({ctx.op})"

    def report(count: int) -> None:
        raise IndexError(
            f"{what}: {count} indices out of bounds for axis {axis} with size {size} ({per_step} a step, counted on "
            f"the device since the last such error); they gathered zeros and passed no gradient")

    counted = DeviceCount(ctx, report, once=False)

    def run(params: Any, indices: Any) -> Any:
        safe, bad = indices_of(indices)
        xp.take(params, safe, axis=axis, out=out)
        xp.copyto(out, 0, where=bad)
        counted.add(bad)
        counted.check()  # reads back only where no recorded step reads the count
        return out

    return Kernel(run, host_state=False)


def gather_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (indices, dy); output dy scattered (summed) into zeros, nothing for indices out of range."""
    xp, out = ctx.xp, ctx.out(0)
    rank = len(ctx.outputs[0].shape)
    axis = normalize_axis(ctx.attrs.get("axis", 0), rank)
    indices_of = _Indices(ctx, rank, axis, ctx.outputs[0].shape[axis])
    lead = (slice(None),) * axis

    def run(indices: Any, dy: Any) -> Any:
        safe, bad = indices_of(indices)
        out.fill(0)
        xp.add.at(out, lead + (safe,), xp.where(bad, 0, dy).astype(dy.dtype, copy=False))
        return out

    return run


KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    GATHER.name: gather_kernel, GATHER_GRAD.name: gather_grad_kernel}
"""The gpu backend's gather kernels, keyed by the op records' names: registered on CuPy and the emulated CuPy alike
(array code, no CUDA source)."""
