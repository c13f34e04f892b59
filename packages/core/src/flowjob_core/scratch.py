"""Temporaries shared by the nodes of one plan (``KernelContext.scratch``).

A plan's kernels run one after another (the session's executor runs one step at a time, under
its run lock), so memory a kernel needs only while its ``run`` executes can be lent to every
other node of the plan. The pool keeps buffers by size class: a node's k-th request of a class
gets the pool's k-th buffer of that class, made on first request and kept as long as the plan.
So a node's requests never overlap one another, and the pool holds, per class, as many buffers
as the most demanding node asked for, not one per node.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

SMALLEST = 256
"""Bytes of the smallest class: tiny temporaries share a few buffers instead of one per size."""


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to 1, 1.25, 1.5 or 1.75 times a power of two (at most a quarter more),
    so requests of neighbouring sizes (a layer's 56x56 and 28x28x4 maps) share one buffer."""
    if nbytes <= SMALLEST:
        return SMALLEST
    step = 1 << ((nbytes - 1).bit_length() - 3)
    return -(-nbytes // step) * step


class ScratchPool:
    """One plan's scratch buffers, raw bytes by size class; views are typed and shaped per request."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self._buffers: dict[int, list[Any]] = {}

    def requests(self) -> "NodeScratch":
        """A fresh request counter for one node's kernel."""
        return NodeScratch(self)

    def buffer(self, size: int, rank: int) -> Any:
        """The ``rank``-th raw buffer of class ``size``, made when first asked for."""
        buffers = self._buffers.setdefault(size, [])
        while len(buffers) <= rank:
            buffers.append(self.xp.empty(size, dtype=self.xp.uint8))
        return buffers[rank]

    @property
    def allocated_bytes(self) -> int:
        return sum(int(b.nbytes) for buffers in self._buffers.values() for b in buffers)


class NodeScratch:
    """The scratch requests of one node's kernel (shared by contexts derived from its own)."""

    def __init__(self, pool: ScratchPool) -> None:
        self.pool = pool
        self._taken: dict[int, int] = {}  # size class -> how many this node holds

    def take(self, shape: Sequence[int], dtype: Any) -> Any:
        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        size = size_class(nbytes)
        rank = self._taken.get(size, 0)
        self._taken[size] = rank + 1
        return self.pool.buffer(size, rank)[:nbytes].view(dtype).reshape(shape)
