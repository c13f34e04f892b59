"""Running a long elementwise computation block by block over the backend's host threads.

Kernels made of many ufunc passes (gelu's normal CDF is some thirty) stream the whole array
through memory once per pass. Cut into blocks that fit a core's cache, each block goes through
all its passes while cached, and the blocks are shared out over ``Backend.parallel`` (numpy's
ufuncs release the GIL). Small arrays and device backends run as one block on the caller's
thread: there the split costs more than it saves, or there is no cache to fit.

Blocks shared over several threads are larger (``SHARED_BLOCK_ITEMS``): every ufunc call hands the GIL
to the other thread and takes it back, and a thread woken for it costs microseconds. Thirty-pass
kernels on 32 Ki-value blocks gained 1.0-1.3x from a second thread, on 128 Ki-value blocks 1.6-1.9x.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable, Sequence

from flowjob_core.ir.opdef import KernelContext

BLOCK_ITEMS = 1 << 15  # 128 KiB of float32 per operand: a few operands and temporaries fit a core's L2
SHARED_BLOCK_ITEMS = 1 << 17  # blocks shared over threads: fewer GIL hand-overs, still within the L3
PARALLEL_ITEMS = 1 << 17


def host_parallel(ctx: KernelContext) -> Callable[..., None] | None:
    """The backend's ``parallel`` where its arrays live in host memory, else None (a device backend
    has no cache to fit and its own parallelism)."""
    return getattr(ctx.backend, "parallel", None) if getattr(ctx.backend, "host_arrays", True) else None


def split_threads(ctx: KernelContext) -> int:
    """The threads ``host_parallel(ctx)`` shares parts over (1 without host threads)."""
    lanes = getattr(ctx.backend, "lanes", None)
    return getattr(lanes, "threads", 1) if host_parallel(ctx) is not None else 1


def _block_items(ctx: KernelContext, block: int | None) -> int:
    """``block``, else the default size: larger where the blocks are shared over threads (the module notes)."""
    if block is not None:
        return block
    return SHARED_BLOCK_ITEMS if split_threads(ctx) > 1 else BLOCK_ITEMS


def _worth_blocking(ctx: KernelContext, size: int) -> bool:
    """Whether ``size`` values on this backend go in blocks (host memory, and large enough to pay for it)."""
    return getattr(ctx.backend, "host_arrays", True) and size >= PARALLEL_ITEMS


class PerThread:
    """Objects made on first use per (key, calling thread): scratch for blocks that run on several threads."""

    def __init__(self) -> None:
        self._made: dict[tuple[Any, int], Any] = {}

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        slot = (key, threading.get_ident())
        value = self._made.get(slot)
        if value is None:
            value = self._made[slot] = make()
        return value


def copy_along_memory(xp: Any, a: Any, out: Any, block_bytes: int | None,
                      split: Callable[..., None] | None = None) -> None:
    """out (C-contiguous, a's shape) = a, copied in chunks along a's outermost memory axis, each chunk
    in a's memory order: numpy then reads along memory, and a chunk and the part of out it lands in
    stay in cache (2-3x cheaper than gathering a strided a in out's order). Chunks over ``split``."""
    order = sorted(range(a.ndim), key=lambda k: -abs(a.strides[k]) if a.shape[k] > 1 else 1)
    at, ot = a.transpose(order), out.transpose(order)
    n = at.shape[0]
    step = n
    if block_bytes and n and a.nbytes:
        step = max(1, min(n, block_bytes // (a.nbytes // n)))
    chunks = [slice(k, k + step) for k in range(0, n, step)]
    each_item(chunks, lambda c: xp.copyto(ot[c], at[c]), split if len(chunks) > 1 else None)


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

    def __init__(self, ctx: KernelContext, size: int, block: int | None = None) -> None:
        block = _block_items(ctx, block) if _worth_blocking(ctx, size) else max(size, 1)
        self.ranges = [(start, min(start + block, size)) for start in range(0, size, block)] or [(0, 0)]
        self._split = host_parallel(ctx) if len(self.ranges) > 1 else None
        self._local = PerThread()

    def each(self, body: Callable[[int, int], None]) -> None:
        each_item(self.ranges, lambda r: body(*r), self._split)

    def per_thread(self, key: Any, make: Callable[[], Any]) -> Any:
        """The calling thread's own object for ``key`` (scratch a block needs), made on first use."""
        return self._local.get(key, make)


class RowBlocks:
    """Runs of the leading axis of an array of ``shape``, each of about ``block`` values: for elementwise work whose
    operands may broadcast or be strided views (a run of leading rows is a view of any layout). ``each(body)`` calls
    ``body(rows)`` on every run, shared over the host threads as ``FlatBlocks`` does; one run (``slice(None)``) for
    small arrays, device backends and a leading axis of one."""

    def __init__(self, ctx: KernelContext, shape: Sequence[int], block: int | None = None) -> None:
        size = math.prod(shape)
        self.ndim, self.rows = len(shape), (shape[0] if shape else 1)
        if not _worth_blocking(ctx, size) or self.rows < 2:
            self.blocks = [slice(None)]
        else:
            step = max(1, _block_items(ctx, block) // max(1, size // self.rows))
            self.blocks = [slice(lo, min(self.rows, lo + step)) for lo in range(0, self.rows, step)]
        self._split = host_parallel(ctx) if len(self.blocks) > 1 else None

    @property
    def whole(self) -> bool:
        return len(self.blocks) == 1

    def part(self, a: Any, rows: slice) -> Any:
        """``a``'s rows ``rows`` where it runs along the leading axis, else all of it (it broadcasts there)."""
        return a[rows] if getattr(a, "ndim", 0) == self.ndim and a.shape[0] == self.rows else a

    def each(self, body: Callable[[slice], None]) -> None:
        each_item(self.blocks, body, self._split)
