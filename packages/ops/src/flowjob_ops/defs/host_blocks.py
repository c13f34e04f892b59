"""Running a long elementwise computation block by block over the backend's host threads.

Kernels made of many ufunc passes (gelu's normal CDF is some thirty) stream the whole array
through memory once per pass. Cut into blocks that fit a core's cache, each block goes through
all its passes while cached, and the blocks are shared out over ``Backend.parallel`` (numpy's
ufuncs release the GIL). Small arrays and device backends run as one block on the caller's
thread: there the split costs more than it saves, or there is no cache to fit.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from flowjob_core import KernelContext

BLOCK_ITEMS = 1 << 15  # 128 KiB of float32 per operand: a few operands and temporaries fit a core's L2
PARALLEL_ITEMS = 1 << 17


def each_item(items: Sequence[Any], body: Callable[[Any], None], split: Callable[..., None] | None) -> None:
    """``body(item)`` for every item: over ``split`` (a ``Backend.parallel``) in contiguous runs of
    items when given, else in order on the calling thread."""

    def run(lo: int, hi: int) -> None:
        for item in items[lo:hi]:
            body(item)

    if split is None:
        run(0, len(items))
    else:
        split(run, len(items))


class FlatBlocks:
    """Ranges [start, stop) covering ``range(size)``; ``each(body)`` calls ``body(start, stop)`` on each."""

    def __init__(self, ctx: KernelContext, size: int, block: int = BLOCK_ITEMS) -> None:
        host = getattr(ctx.backend, "host_arrays", True)
        split = getattr(ctx.backend, "parallel", None)
        if not host or size < PARALLEL_ITEMS:
            block = max(size, 1)
        self.ranges = [(start, min(start + block, size)) for start in range(0, size, block)] or [(0, 0)]
        self._split = split if host and split is not None and len(self.ranges) > 1 else None
        self._local: dict[tuple[Any, int], Any] = {}

    def each(self, body: Callable[[int, int], None]) -> None:
        each_item(self.ranges, lambda r: body(*r), self._split)

    def per_thread(self, key: Any, make: Callable[[], Any]) -> Any:
        """The calling thread's own object for ``key`` (scratch a block needs), made on first use."""
        slot = (key, threading.get_ident())
        value = self._local.get(slot)
        if value is None:
            value = self._local[slot] = make()
        return value
