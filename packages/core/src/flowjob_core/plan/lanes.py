"""The inter-op schedule: which nodes of a step run side by side on the host threads.

The schedule (``planner.schedule``) is one order; this cuts it into sections, contiguous runs of that
order. A chain section runs on the step's own thread, in order, with BLAS on every thread the setting
allows. A lanes section runs its nodes on up to ``threads`` lanes at once, BLAS on one thread each; a
node waits only for the nodes of other lanes it depends on (its inputs' producers, and for a node
writing a value in place, that value's other readers), and the section ends when every lane is done.
So a convolution's filter gradient runs beside its data gradient and the rest of the backward chain,
residual branches beside each other, the per-variable updates side by side.

Where to cut is decided from estimated times (``estimate``: the bytes a node touches, and the arithmetic
its op's ``flops`` reports; on a chain the arithmetic, and a large node's memory passes, which its kernel
splits, spread over the threads) by a dynamic program over the order: each run of nodes either stays a chain
or becomes a lanes section, whichever ends sooner once the cost of waking the lanes and of each
cross-lane wait is counted. Lanes are filled by list scheduling (each node, in order, on the lane where it
would finish first). Everything is decided from the specs, so every rank of an MPI job cuts the same way;
``ordered`` and ``effect`` nodes are kept on lane 0, the step's own thread, in schedule order.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from flowjob_core.backends.host_threads import LaneAborted
from flowjob_core.ir.job import Job, Node

if TYPE_CHECKING:
    from flowjob_core.ir.analysis import OpTable

BYTES_PER_US = 2000.0
"""Bytes an elementwise numpy pass reads or writes per microsecond on one core (about 2 GB/s)."""
FLOPS_PER_US = 20000.0
"""Arithmetic a BLAS call does per microsecond on one core (about 20 GFLOP/s single precision)."""
CALL_US = 2.0
"""A kernel call's fixed cost."""
BLAS_EFFICIENCY = 0.85
"""The share of each thread a BLAS call, or a kernel split over the threads, on a chain turns into speed."""
SPLIT_BYTES = 1 << 20
"""A node moving this many bytes or more has a kernel that splits its passes over the host threads on a chain
(the elementwise blocks, pooling, the convolutions' copies and Winograd chunks): its memory time shrinks with
the threads there as its arithmetic does."""
WAIT_US = 15.0
"""A lane waiting for another lane's node: the wake-up when it must block."""
SECTION_US = 40.0
"""Starting the lanes of a section and joining them."""
WINDOW = 48
"""The longest section considered, in nodes (bounds the planning time of large graphs)."""


@dataclass
class Section:
    """A contiguous run of the schedule (``start`` to ``stop``, order positions) and its lanes; a chain has one."""

    start: int
    stop: int
    lanes: list[list[int]] = field(default_factory=list)  # order positions per lane, each in order

    @property
    def parallel(self) -> bool:
        return len(self.lanes) > 1


@dataclass
class LanePlan:
    """The sections, in order; per order position its lane, and the nodes it waits for on other lanes."""

    sections: list[Section]
    lane_of: list[int]
    waits: dict[int, list[int]]
    signalled: set[int]
    estimate_us: list[float]

    @property
    def parallel(self) -> bool:
        return any(s.parallel for s in self.sections)

    def concurrent(self, position: int) -> list[int]:
        """The positions of nodes that may run while the node at ``position`` does (other lanes of its section)."""
        for section in self.sections:
            if section.start <= position < section.stop:
                if not section.parallel:
                    return []
                mine = self.lane_of[position]
                return [p for k, lane in enumerate(section.lanes) if k != mine for p in lane]
        return []


def estimate(node: Node, job: Job, ops: "OpTable") -> tuple[float, float, float]:
    """The node's estimated time on one thread, its arithmetic (BLAS's, spread over the threads on a chain) and
    its memory passes where the node is large enough for its kernel to split them, in microseconds."""
    if node.op == "input":
        return 0.0, 0.0, 0.0
    opdef = ops[node.op]
    if opdef.effects.view:
        return CALL_US / 2, 0.0, 0.0
    ins = [job.specs[i] for i in node.inputs]
    outs = [job.specs[o] for o in node.outputs]
    moved = sum(s.nbytes for s in ins) + sum(s.nbytes for s in outs)
    flops = opdef.compute.flops
    flops_us = float(flops(ins, outs, node.attrs)) / FLOPS_PER_US if flops is not None else 0.0
    memory_us = moved / BYTES_PER_US
    return CALL_US + memory_us + flops_us, flops_us, memory_us if moved >= SPLIT_BYTES else 0.0


SPLIT_SHARE = 0.2
"""A plan whose large memory passes (split by their kernels) are estimated at this share of its time or more holds
BLAS to one thread (``blas_wide``)."""


def blas_wide(job: Job, order: Sequence[Node], ops: "OpTable") -> bool:
    """Whether a plan's chains give BLAS every thread. Not where a node's kernels cut their own work over the host
    threads (``OpDef.compute.host_split``), nor where large memory passes, which kernels split, are a good share of the
    step (``SPLIT_SHARE``): BLAS then keeps one thread per caller and large products are cut over the host threads
    (``backends.host_gemm``), for OpenBLAS's idle workers spin on the cores those parts need."""
    if any(node.op != "input" and ops[node.op].compute.host_split for node in order):
        return False
    total = split = 0.0
    for node in order:
        t1, flops_us, split_us = estimate(node, job, ops)
        total += t1
        if node.inputs and not flops_us:  # a pass over memory (a product's memory is BLAS's; a source moves none)
            split += split_us
    return split < SPLIT_SHARE * total


def plan_lanes(job: Job, order: Sequence[Node], deps: Sequence[set[int]], ops: "OpTable", threads: int) -> LanePlan:
    """Cut ``order`` into chain and lanes sections for ``threads`` threads (``deps``: per order position, the
    positions that must run before it)."""
    n = len(order)
    alone = [0.0] * n
    chain = [0.0] * n
    for p, node in enumerate(order):
        t1, flops_us, split_us = estimate(node, job, ops)
        spread_us = flops_us + split_us
        alone[p] = t1
        chain[p] = t1 - spread_us + spread_us / max(1.0, threads * BLAS_EFFICIENCY) if threads > 1 else t1
    pinned = {p for p, node in enumerate(order)
              if node.op != "input" and (ops[node.op].effects.ordered or ops[node.op].effects.effect)}
    lane_of = [0] * n
    if threads <= 1 or n < 2:
        return LanePlan([Section(0, n, [list(range(n))])], lane_of, {}, set(), alone)
    best = [float("inf")] * (n + 1)
    choice: list[tuple[int, bool]] = [(0, False)] * (n + 1)  # (start of the last section, lanes?)
    best[0] = 0.0
    for a in range(n):
        if best[a] + chain[a] < best[a + 1]:
            best[a + 1] = best[a] + chain[a]
            choice[a + 1] = (a, False)
        sim = _ListSchedule(a, threads, alone, deps, pinned)
        for b in range(a, min(n, a + WINDOW)):
            sim.add(b)
            if b > a:
                total = best[a] + sim.makespan + SECTION_US
                if total < best[b + 1]:
                    best[b + 1] = total
                    choice[b + 1] = (a, True)
    # walk back: chain positions merge into runs, each lanes section is scheduled again to record its lanes
    cuts: list[tuple[int, int, bool]] = []
    b = n
    while b > 0:
        a, lanes = choice[b]
        cuts.append((a, b, lanes))
        b = a
    cuts.reverse()
    sections: list[Section] = []
    waits: dict[int, list[int]] = {}
    signalled: set[int] = set()
    for a, b, lanes in cuts:
        if not lanes:
            if sections and not sections[-1].parallel:
                sections[-1].stop = b
                sections[-1].lanes[0].extend(range(a, b))
            else:
                sections.append(Section(a, b, [list(range(a, b))]))
            continue
        sim = _ListSchedule(a, threads, alone, deps, pinned)
        for p in range(a, b):
            sim.add(p)
        used = sorted({sim.lane[p] for p in range(a, b)}, key=lambda k: (k != 0, k))
        renumber = {k: i for i, k in enumerate(used)}
        section = Section(a, b, [[] for _ in used])
        for p in range(a, b):
            lane_of[p] = renumber[sim.lane[p]]
            section.lanes[lane_of[p]].append(p)
        sections.append(section)
        for lane in section.lanes:
            seen: dict[int, int] = {}  # other lane -> the latest position already waited for there
            for p in lane:
                for d in sorted(deps[p]):
                    if d < a or lane_of[d] == lane_of[p] or seen.get(lane_of[d], -1) >= d:
                        continue
                    waits.setdefault(p, []).append(d)
                    signalled.add(d)
                    seen[lane_of[d]] = d
    return LanePlan(sections, lane_of, waits, signalled, alone)


class _ListSchedule:
    """Nodes from position ``start`` on, added in order, each on the lane where it finishes first."""

    def __init__(self, start: int, threads: int, cost: Sequence[float], deps: Sequence[set[int]],
                 pinned: set[int]) -> None:
        self.start, self.cost, self.deps, self.pinned = start, cost, deps, pinned
        self.free = [0.0] * threads
        self.finish: dict[int, float] = {}
        self.lane: dict[int, int] = {}
        self.makespan = 0.0

    def add(self, p: int) -> None:
        inside = [d for d in self.deps[p] if d >= self.start]
        best_lane, best_end = 0, float("inf")
        for lane in ((0,) if p in self.pinned else range(len(self.free))):
            ready = self.free[lane]
            for d in inside:
                ready = max(ready, self.finish[d] + (WAIT_US if self.lane[d] != lane else 0.0))
            end = ready + self.cost[p]
            if end < best_end:
                best_lane, best_end = lane, end
        self.lane[p] = best_lane
        self.finish[p] = best_end
        self.free[best_lane] = best_end
        if best_end > self.makespan:
            self.makespan = best_end


class Signals:
    """One step's "node done" marks of a lanes section: a lane sets a mark after its node, another waits for it.

    A mark is a lock held from the start and released once; waiting takes and gives it back, so any number
    of lanes may wait. ``abort`` (a lane failed) releases every mark still held, and waiters raise
    ``LaneAborted`` instead of running on values that were never made.
    """

    __slots__ = ("_locks", "_released", "_guard", "aborted")

    def __init__(self, count: int) -> None:
        self._locks = [threading.Lock() for _ in range(count)]
        for lock in self._locks:
            lock.acquire()
        self._released = [False] * count
        self._guard = threading.Lock()
        self.aborted = False

    def set(self, k: int) -> None:
        with self._guard:
            if not self._released[k]:
                self._released[k] = True
                self._locks[k].release()

    def wait(self, k: int) -> None:
        lock = self._locks[k]
        lock.acquire()
        lock.release()
        if self.aborted:
            raise LaneAborted(f"a lane this one waits for failed (mark {k})")

    def abort(self) -> None:
        self.aborted = True
        for k in range(len(self._locks)):
            self.set(k)
