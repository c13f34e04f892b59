"""``flow.profiler``: legacy v0.4's profiler ranges.

``range_push(name)`` / ``range_pop()`` mark a stretch of the host program (around job calls, say);
``nvtx_start(x, mark_prefix)`` / ``nvtx_end(x, mark_prefix)`` mark a stretch of a job's graph (their records:
``flowjob_ops.records.profiling``). On a CUDA backend both push and pop NVTX ranges, which Nsight Systems
shows as legacy's did; on every backend each range's wall time is logged to the ``flowjob.profiler`` logger
at DEBUG when it ends (``flow.env.log_dir``'s run log keeps it when that level is on), and
``bench/profile_plan.py`` sums the step time of the graph's ranges.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from flowjob_core import Blob, FlowjobError, apply
from flowjob_core.runtime.session import get_default_session

__all__ = ["nvtx_end", "nvtx_start", "range_pop", "range_push"]

_log = logging.getLogger("flowjob.profiler")
_open = threading.local()  # each thread's open host ranges, innermost last, as NVTX keeps them per thread


def _stack() -> list[tuple[str, float]]:
    stack = getattr(_open, "ranges", None)
    if stack is None:
        stack = _open.ranges = []
    return stack


def _device_marks() -> Any:
    """The session backend's ``(push, pop)`` of its profiler's ranges (NVTX on CUDA), or None (numpy)."""
    return get_default_session().backend.profiler_range


def range_push(range_name: str) -> None:
    """Open the host range ``range_name`` (ranges nest; :func:`range_pop` closes the innermost)."""
    if not isinstance(range_name, str) or not range_name:
        raise FlowjobError(f"flow.profiler.range_push: range_name must be a non-empty str, got {range_name!r}")
    marks = _device_marks()
    if marks is not None:
        marks[0](range_name)
    _stack().append((range_name, time.perf_counter()))


def range_pop() -> None:
    """Close the innermost open host range, logging its wall time to ``flowjob.profiler`` (DEBUG)."""
    stack = _stack()
    if not stack:
        raise FlowjobError("flow.profiler.range_pop: no range is open in this thread (call range_push first)")
    name, began = stack.pop()
    marks = _device_marks()
    if marks is not None:
        marks[1]()
    _log.debug("range %r: %.3f ms", name, (time.perf_counter() - began) * 1e3)


def nvtx_start(x: Blob, mark_prefix: str, name: str | None = None) -> Blob:
    """``x`` itself; the range ``mark_prefix`` of the job's graph starts when a step computes it."""
    return apply("nvtx_start", [x], {"mark_prefix": mark_prefix}, name=name)


def nvtx_end(x: Blob, mark_prefix: str, name: str | None = None) -> Blob:
    """``x`` itself; the range ``mark_prefix`` ends when a step computes it."""
    return apply("nvtx_end", [x], {"mark_prefix": mark_prefix}, name=name)
