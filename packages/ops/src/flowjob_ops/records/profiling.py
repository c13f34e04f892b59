"""``nvtx_start`` / ``nvtx_end``: legacy v0.4's profiler marks in the graph (``flow.profiler.nvtx_start``).

Each is ``x`` itself (a view) whose kernel marks the range ``mark_prefix`` when the step reaches it: on a
CUDA backend an NVTX range is pushed and popped (``Backend.profiler_range``), so it shows in Nsight as
legacy's did; on every backend the range's wall time from start to end is logged to the
``flowjob.profiler`` logger at DEBUG (the run log of ``flow.env.log_dir`` keeps it when that level is on),
and ``bench/profile_plan.py`` sums its nodes' times per range.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, LegacyFace, OpDef, ShapeError

_log = logging.getLogger("flowjob.profiler")


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 1:
        raise ShapeError(f"the profiler mark takes one input 'in', got {len(inputs)}")
    prefix = attrs.get("mark_prefix")
    if not isinstance(prefix, str) or not prefix:
        raise ShapeError(f"the profiler mark needs mark_prefix, a non-empty str, got {prefix!r}")
    return [inputs[0]]


def _mark(ctx: KernelContext, start: bool) -> Any:
    prefix = ctx.attrs["mark_prefix"]
    marks, starts = ctx.backend.profiler_range, ctx.shared.setdefault("nvtx-starts", {})

    def run(x: Any) -> Any:
        if start:
            starts[prefix] = time.perf_counter()
            if marks is not None:
                marks[0](prefix)
            return x
        if marks is not None:
            marks[1]()
        began = starts.pop(prefix, None)
        if began is not None and _log.isEnabledFor(logging.DEBUG):
            _log.debug("range %r: %.3f ms", prefix, (time.perf_counter() - began) * 1e3)
        return x

    return run


NVTX_START = OpDef("nvtx_start", _infer, kernel=lambda ctx: _mark(ctx, True), grad=lambda ctx: [ctx.dy],
                   doc="x itself; starts the profiler range mark_prefix when the step reaches it",
                   compute=Compute(amp="clear"), effects=Effects(view=True),
                   legacy=LegacyFace(input_names=("in",), attr_names=("mark_prefix",)))
NVTX_END = OpDef("nvtx_end", _infer, kernel=lambda ctx: _mark(ctx, False), grad=lambda ctx: [ctx.dy],
                 doc="x itself; ends the profiler range mark_prefix (its time is logged to flowjob.profiler)",
                 compute=Compute(amp="clear"), effects=Effects(view=True),
                 legacy=LegacyFace(input_names=("in",), attr_names=("mark_prefix",)))

OPS = (NVTX_START, NVTX_END)
