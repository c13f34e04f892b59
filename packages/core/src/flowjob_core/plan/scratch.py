"""Temporaries shared by the nodes of one plan (``KernelContext.scratch``).

A plan's steps run one after another (the session's executor runs one step at a time, under
its run lock), so memory a kernel needs only while its ``run`` executes can be lent to every
other node of the plan that never runs at the same time: all of them for a step run in order; for
a step whose lanes run nodes side by side (``flowjob_core.plan.lanes``), all but the nodes of the
other lanes of its section, which the planner names as ``beside`` when it asks for a node's record.
Each request of a node gets the smallest of the pool's buffers that this node, and any node beside it,
does not hold already and that fits it without being more than ``SLACK`` times its size;
failing that, a new buffer, its size rounded up to a size class so that somewhat larger requests
of later nodes fit it too. So a node's requests never overlap one another, and the pool holds
about as much as its most demanding nodes ask for, not one set per node (ResNet-50's train plan:
198 MB for 136 MB asked by its largest node, where one buffer per size class and rank held 324 MB).
"""
from __future__ import annotations

import bisect
from typing import AbstractSet, Any, Sequence

import numpy as np

SMALLEST = 256
"""Bytes of the smallest class: tiny temporaries share a few buffers instead of one per size."""

SLACK = 4
"""A request takes a buffer up to this many times its size: a larger one stays for larger requests."""


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to 1, 1.25, 1.5 or 1.75 times a power of two (at most a quarter more)."""
    if nbytes <= SMALLEST:
        return SMALLEST
    step = 1 << ((nbytes - 1).bit_length() - 3)
    return -(-nbytes // step) * step


class ScratchPool:
    """One plan's scratch buffers, raw bytes; views are typed and shaped per request."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self._buffers: list[Any] = []
        self._by_size: list[tuple[int, int]] = []  # (bytes, index into _buffers), in order

    def requests(self, beside: Sequence["NodeScratch"] = ()) -> "NodeScratch":
        """A fresh request record for one node's kernel; ``beside``: the records of the nodes that may run
        at the same time (other lanes of its section), whose buffers it never gets."""
        return NodeScratch(self, beside)

    def lend(self, nbytes: int, held: AbstractSet[int], barred: AbstractSet[int] = frozenset()) -> int:
        """The index of the buffer for a request of ``nbytes`` by a node holding ``held``, never one in ``barred``."""
        limit = SLACK * max(nbytes, SMALLEST)
        for size, index in self._by_size[bisect.bisect_left(self._by_size, (nbytes, -1)):]:
            if size > limit:
                break
            if index not in held and index not in barred:
                return index
        size = size_class(nbytes)
        self._buffers.append(self.xp.empty(size, dtype=self.xp.uint8))
        bisect.insort(self._by_size, (size, len(self._buffers) - 1))
        return len(self._buffers) - 1

    def buffer(self, index: int) -> Any:
        return self._buffers[index]

    @property
    def allocated_bytes(self) -> int:
        return sum(int(b.nbytes) for b in self._buffers)


class NodeScratch:
    """The scratch requests of one node's kernel (shared by contexts derived from its own)."""

    def __init__(self, pool: ScratchPool, beside: Sequence["NodeScratch"] = ()) -> None:
        self.pool = pool
        self._held: set[int] = set()  # the pool buffers this node holds
        self._beside = list(beside)

    def take(self, shape: Sequence[int], dtype: Any) -> Any:
        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        barred = set().union(*(other._held for other in self._beside)) if self._beside else set()
        index = self.pool.lend(nbytes, self._held, barred)
        self._held.add(index)
        return self.pool.buffer(index)[:nbytes].view(dtype).reshape(shape)
