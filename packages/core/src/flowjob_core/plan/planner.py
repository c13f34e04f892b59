"""From a job to a plan: a schedule, a buffer plan and one generated Python step function.

The step function is straight-line code, one kernel call per node with values in local
variables, so executing an op costs one Python call and nothing else: no graph walk, no
dict lookups, no hook calls.
"""
from __future__ import annotations

import bisect
import functools
import heapq
import linecache
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from flowjob_core.ir.analysis import buffer_roots, fetched_values, in_place_writers
from flowjob_core.ir.bindings import Bindings
from flowjob_core.errors import FlowjobError
from flowjob_core.plan.extent import Followers
from flowjob_core.ir.job import Job, Node
from flowjob_core.plan import kernel_outputs, numerics
from flowjob_core.ir.kernel import kernel_of, runs_live
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.plan.lanes import LanePlan, Section, Signals, blas_wide, plan_lanes
from flowjob_core.plan.pieces import StepCall, StepProgram
from flowjob_core.plan.scratch import NodeScratch, ScratchPool

if TYPE_CHECKING:
    from flowjob_core.plugins.registry import Backend, Registries
    from flowjob_core.runtime.variables import VariableStore


class StepError(FlowjobError, RuntimeError):
    """A kernel failed while a step ran; names the job, the op and the user's source line."""


def schedule(job: Job, registries: "Registries") -> list[Node]:
    """Job order, except that a node writing a value in place runs after every other reader of it."""
    deps, mutators = dependencies(job, registries)
    users: list[list[int]] = [[] for _ in job.nodes]
    indegree = [0] * len(job.nodes)
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
        indegree[i] = len(d)
    ready = [((i in mutators), i) for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(job.nodes[i])
        for u in users[i]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, ((u in mutators), u))
    if len(order) != len(job.nodes):
        stuck = [job.nodes[i].name for i, d in enumerate(indegree) if d > 0]
        raise FlowjobError(f"job {job.name!r}: no order satisfies the data dependencies and in-place writes "
                           f"of {stuck[:8]} (two nodes each writing a value the other reads?)")
    return order


def dependencies(job: Job, registries: "Registries") -> tuple[list[set[int]], set[int]]:
    """For each node (by index in ``job.nodes``), the nodes that must run before it: the producers of its
    inputs and, for a node writing a value in place, every other reader of that value; and the writers."""
    ops = registries.ops
    index = {id(n): i for i, n in enumerate(job.nodes)}
    producer: dict[str, int] = {}
    root = buffer_roots(job.nodes, ops)  # value -> the buffer it lives in (views share their input's)
    deps: list[set[int]] = [set() for _ in job.nodes]
    readers: dict[str, set[int]] = {}
    for i, node in enumerate(job.nodes):
        for lbn in node.inputs:
            deps[i].add(producer[lbn])
            readers.setdefault(root[lbn], set()).add(i)
        for lbn in node.outputs:
            producer[lbn] = i
    # root -> nodes writing it in place
    written = {r: [index[id(n)] for n in nodes] for r, nodes in in_place_writers(job.nodes, ops, root).items()}
    mutators = {i for writers in written.values() for i in writers}
    for r, writers in written.items():
        for earlier, later in zip(writers, writers[1:]):
            deps[later].add(earlier)  # writers of one value keep job order, also when lanes run side by side
        for i in writers:
            # every other reader of the old value goes first, in-place writers of other values too
            # (a fused update reading this variable); writers of the same value keep job order
            for reader in readers.get(r, ()):
                if reader not in writers:
                    deps[i].add(reader)
    return deps, mutators


@dataclass
class BufferPlan:
    """Which arena slot each value's output buffer uses; slots are shared by disjoint lifetimes."""

    slot_of: dict[str, int] = field(default_factory=dict)
    slot_nbytes: list[int] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(self.slot_nbytes)


def plan_buffers(job: Job, order: list[Node], registries: "Registries", lanes: "LanePlan | None" = None) -> BufferPlan:
    """Output slots by lifetime. With ``lanes``, every node of a lanes section counts as running for the whole
    section: a slot a value leaves there is taken only after the section, never by a node that may run beside
    the last reader."""
    ops = registries.ops
    root = buffer_roots(order, ops)
    when = list(range(len(order)))
    if lanes is not None:
        for section in lanes.sections:
            if section.parallel:
                when[section.start:section.stop] = [section.start] * (section.stop - section.start)
    last_use: dict[str, int] = {}
    for t, node in enumerate(order):
        for lbn in node.inputs:
            last_use[root[lbn]] = when[t]
        for lbn in node.outputs:
            last_use.setdefault(root[lbn], when[t])
    for lbn in fetched_values(job):
        last_use[root[lbn]] = len(order)  # read after the step: never shared
    plan = BufferPlan()
    free: list[tuple[int, int]] = []  # (nbytes, slot) of the free slots, in order
    release_at: dict[int, list[str]] = {}
    for r, t in last_use.items():
        release_at.setdefault(t, []).append(r)
    for t, node in enumerate(order):
        opdef = ops[node.op]
        if not opdef.effects.view:
            for lbn in node.outputs:
                plan.slot_of[lbn] = _take_slot(plan, free, job.specs[lbn].nbytes)
        if t + 1 < len(order) and when[t + 1] == when[t]:
            continue  # inside a lanes section: releases wait for its end
        for r in release_at.get(when[t], ()):
            released = plan.slot_of.get(r)
            if released is not None:
                bisect.insort(free, (plan.slot_nbytes[released], released))
    return plan


SLOT_SLACK = 2
"""A value takes a free slot up to this many times its size (a smaller one would leave a large slot
idle for its lifetime); slot sizes are only numbers until the arena first uses a slot."""


def _take_slot(plan: BufferPlan, free: list[tuple[int, int]], nbytes: int) -> int:
    """The smallest free slot that holds ``nbytes`` (within ``SLOT_SLACK``), else the largest smaller
    free slot grown to ``nbytes``, else a new slot. Growing costs the difference where a new slot
    costs it all: ResNet-50's train plan sums 1589 MB of slots instead of 1858 MB with exact sizes
    only (1415 MB of values are alive at its peak)."""
    i = bisect.bisect_left(free, (nbytes, -1))
    if i < len(free) and free[i][0] <= SLOT_SLACK * nbytes:
        return free.pop(i)[1]
    if i > 0:
        slot = free.pop(i - 1)[1]
        plan.slot_nbytes[slot] = nbytes
        return slot
    plan.slot_nbytes.append(nbytes)
    return len(plan.slot_nbytes) - 1


SLOT_ALIGNMENT = 256  # bytes between slots of a one-allocation arena: what CUDA's allocator aligns to


class Arena:
    """Slot memory, allocated on first use, handed out as typed, shaped views; and the plan's
    scratch pool (``KernelContext.scratch``), which plans reusing the arena share too.

    ``one_allocation`` (``Backend.arena_in_one_allocation``: a device's): every slot is a part of one buffer,
    allocated when the first is used, at ``SLOT_ALIGNMENT``-byte offsets; else each slot is its own buffer."""

    def __init__(self, xp: Any, buffers: BufferPlan, one_allocation: bool = False) -> None:
        self.xp = xp
        self.buffers = buffers
        self._raw: dict[int, Any] = {}
        self._whole: Any = None  # the one allocation, when the slots share one
        self.one_allocation = one_allocation
        self.scratch = ScratchPool(xp)

    def view(self, lbn: str, spec: Any) -> Any:
        slot = self.buffers.slot_of[lbn]
        raw = self._raw.get(slot)
        if raw is None:
            raw = self._slot(slot)
        return raw[: spec.nbytes].view(spec.dtype).reshape(spec.shape)

    def _slot(self, slot: int) -> Any:
        sizes = self.buffers.slot_nbytes
        if not self.one_allocation:
            raw = self._raw[slot] = self.xp.empty(max(sizes[slot], 1), dtype=self.xp.uint8)
            return raw
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + -(-max(size, 1) // SLOT_ALIGNMENT) * SLOT_ALIGNMENT)
        self._whole = self.xp.empty(offsets[-1], dtype=self.xp.uint8)
        for k, size in enumerate(sizes):
            self._raw[k] = self._whole[offsets[k]: offsets[k] + max(size, 1)]
        return self._raw[slot]

    @property
    def allocated_bytes(self) -> int:
        if self._whole is not None:
            return int(self._whole.nbytes)
        return sum(int(r.nbytes) for r in self._raw.values())


@dataclass
class Plan:
    job: Job
    backend: "Backend"
    order: list[Node]
    buffers: BufferPlan
    arena: Arena
    step: Callable[[list[Any]], tuple[tuple[Any, ...], tuple[Any, ...]]]
    source: str
    kernel_count: int
    side_consumers: list[Callable[[Any], None]]
    blas_hold: Callable[[], None] | None = None

    def run(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        if self.blas_hold is not None:
            self.blas_hold()  # this plan's BLAS width (another plan of the session may have set another)
        try:
            return self.step(feeds)
        except FlowjobError:
            raise
        except Exception as exc:
            raise self._step_error(exc) from exc

    def _step_error(self, exc: BaseException) -> StepError:
        tb = exc.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._filename:
                node = self._line_nodes.get(tb.tb_lineno)
            elif self.program is not None:  # a piece of the step (flowjob_core.plan.pieces)
                node = self.program.piece_lines.get(tb.tb_frame.f_code.co_filename, {}).get(tb.tb_lineno, node)
            tb = tb.tb_next
        if node is None:
            return StepError(f"job {self.job.name!r}: step failed: {exc!r}")
        return StepError(f"job {self.job.name!r}, op {node.name!r} ({node.op}) at {node.source}: "
                         f"kernel failed: {exc!r}")

    _filename: str = ""
    _line_nodes: dict[int, Node] = field(default_factory=dict)
    checks_numerics: bool = False  # plans specialised from this one (smaller dynamic feeds) check too
    lanes: LanePlan | None = None  # the sections run side by side on the host threads (None: in order)
    program: StepProgram | None = None  # the step's calls as data where they run in order (None: lanes)
    shared: dict[Any, Any] = field(default_factory=dict)
    """The kernels' shared dict (``KernelContext.shared``): what they offer the step's driver (a backend's step
    recorder reads the device counts kernels register there, ``flowjob_ops.kernels.device_counts``)."""


def build_plan(job: Job, backend: "Backend", registries: "Registries", variables: "VariableStore",
               bindings: Bindings | None = None, *, reuse: "tuple[list[Node], Any] | None" = None) -> Plan:
    """``bindings``: the table the side outputs' consumer keys and the objects attributes name by key are
    looked up in (the global function's).

    ``reuse``: (order, arena) of a plan of the same nodes, for a job whose specs differ (``flowjob_core.plan.dynamic``
    specialises a plan to smaller fed shapes inside the max-sized arena slots).
    """
    ops, kernels = registries.ops, registries.kernels
    bindings = bindings if bindings is not None else Bindings()
    side_consumers = _side_consumers(job, bindings)
    check = numerics.active(job)  # enable_numerics_check (flow.config, FLOWJOB_, function_config): off, no wrapping
    dynamic_extent = _holds_dynamic_extent(job.nodes, registries)
    lane_plan: LanePlan | None = None
    wide: bool | None = None  # the plan's BLAS width (lanes.blas_wide), once decided
    if reuse is None:
        order = schedule(job, registries)
        # side by side only where the numerics check's first failing op and the data-dependent readers, built
        # while the step runs, keep their meaning; a plan specialised to smaller feeds (reuse) runs in order
        host = backend.lanes
        if host is not None:
            # BLAS held to the thread count, also where nothing runs side by side; to one thread where the plan's
            # kernels cut their own work over the host threads (lanes.blas_wide)
            wide = blas_wide(job, order, ops)
            host.apply(blas_wide=wide)
        if host is not None and not check and not dynamic_extent and host.threads > 1:
            lane_plan = plan_lanes(job, order, order_dependencies(job, order, registries), ops, host.threads)
            if not lane_plan.parallel:
                lane_plan = None
        buffers = plan_buffers(job, order, registries, lane_plan)
        arena = Arena(backend.xp, buffers, backend.arena_in_one_allocation)
    else:
        order, arena = reuse
        buffers = arena.buffers
    blas_hold = None
    if backend.lanes is not None:
        blas_hold = functools.partial(backend.lanes.blas.hold, blas_wide(job, order, ops) if wide is None else wide)
        blas_hold()  # the kernels built below see the plan's choice (host_gemm cuts products where BLAS is narrow)
    names: dict[str, str] = {}
    namespace: dict[str, Any] = {}
    shared: dict[Any, Any] = {}  # lives as long as the plan's kernels
    # one pool per arena: a plan specialised to smaller feeds (flowjob_core.plan.dynamic) runs in turn with
    # its declared-shape plan, never at once, so it borrows that plan's pool through its arena's base
    scratch = getattr(arena, "base", arena).scratch
    requests: dict[int, NodeScratch] = {}  # order position -> its node's scratch requests

    def var(lbn: str) -> str:
        if lbn not in names:
            names[lbn] = f"v{len(names)}"
        return names[lbn]

    placeholder_vars = [var(p.lbn) for p in job.placeholders]
    calls: dict[int, str] = {}  # order position -> the statement calling its kernel
    program_calls: list[StepCall] = []  # the same calls as data, in order (flowjob_core.plan.pieces)
    kernel_count = 0
    followers = None  # readers of data-dependent rows (argwhere): kernels built per actual shape
    if dynamic_extent:
        followers = Followers(job, order, backend, registries, variables, arena, shared)
    for position, node in enumerate(order):
        if node.op == "input":
            continue
        opdef = ops[node.op]
        builder = kernels.lookup(opdef, backend.tag)
        if builder is None:
            raise FlowjobError(f"job {job.name!r}: op {node.name!r} ({node.op}) has no kernel for backend "
                               f"{backend.tag!r} ({backend.name})")
        in_specs = tuple(job.specs[i] for i in node.inputs)
        out_specs = tuple(job.specs[o] for o in node.outputs)

        def out_buffer(k: int, _node: Node = node, _specs: tuple = out_specs) -> Any:
            lbn = _node.outputs[k]
            if lbn not in buffers.slot_of:
                raise FlowjobError(f"op {_node.op!r} is a view op; its kernel may not ask for an output buffer")
            return arena.view(lbn, _specs[k])

        # a node that may run beside others never gets a scratch buffer one of them holds
        beside = [requests[p] for p in lane_plan.concurrent(position) if p in requests] if lane_plan else []
        requests[position] = scratch.requests(beside)
        kctx = KernelContext(backend.xp, backend, node.op, node.name, node.attrs, in_specs, out_specs, job.type,
                             variables.array, out_buffer, shared, requests[position], bindings, ops)
        follows = followers is not None and followers.follows(node)
        try:
            kernel = kernel_of(followers.kernel(node, builder) if followers is not None and follows
                               else builder(kctx))
        except FlowjobError:
            raise
        except Exception as exc:
            raise FlowjobError(f"job {job.name!r}: building the kernel of op {node.name!r} ({node.op}) at "
                               f"{node.source} failed: {exc!r}") from exc
        live = runs_live(opdef, kernel, drew_rng=kctx.host_state)
        fn = kernel.run
        if check:
            fn = numerics.checked(fn, backend.xp, job, node, opdef.effects.mutates, opdef.compute.intended_inf)
        kname = f"k{kernel_count}"
        kernel_count += 1
        # the first call (every call in debug mode) checks the outputs against inference
        namespace[kname] = kernel_outputs.checked(namespace, kname, fn, job, node, out_specs,
                                                  every_call=check or numerics.outputs_every_call(),
                                                  flexible_extent=follows or opdef.shape.dynamic_extent,
                                                  gated=kernel.gated)
        call = f"{kname}({', '.join(var(i) for i in node.inputs)})"
        if node.outputs:
            call = f"{', '.join(var(o) for o in node.outputs)} = {call}"
        calls[position] = call
        program_calls.append(StepCall(node, kname, tuple(var(i) for i in node.inputs),
                                      tuple(var(o) for o in node.outputs), live))
    lines = ["def step(feeds):"]
    if placeholder_vars:
        lines.append(f"    {', '.join(placeholder_vars)}, = feeds")
    line_nodes: dict[int, Node] = {}
    if lane_plan is None:
        for position in sorted(calls):
            lines.append(f"    {calls[position]}")
            line_nodes[len(lines)] = order[position]
    else:
        namespace["_lanes"], namespace["_Signals"] = backend.lanes.lanes, Signals
        for number, section in enumerate(lane_plan.sections):
            _section_source(number, section, lane_plan, order, calls, var, lines, line_nodes)
    rets = "".join(f"{var(lbn)}, " for lbn in job.returns)
    sides = "".join(f"{var(s.lbn)}, " for s in job.side_outputs)
    lines.append(f"    return ({rets}), ({sides})")
    source = "\n".join(lines) + "\n"
    filename = f"<flowjob plan {job.name} {id(job):x}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # readable tracebacks
    exec(compile(source, filename, "exec"), namespace)
    step = namespace["step"]
    if check:
        step = numerics.checked_feeds(step, backend.xp, job)
    plan = Plan(job, backend, order, buffers, arena, step, source, kernel_count,
                side_consumers, blas_hold)
    plan._filename = filename
    plan._line_nodes = line_nodes
    plan.checks_numerics = check
    plan.lanes = lane_plan
    plan.shared = shared
    if lane_plan is None:
        plan.program = StepProgram(job.name, namespace, program_calls, tuple(placeholder_vars),
                                   tuple(var(lbn) for lbn in job.returns), tuple(var(s.lbn) for s in job.side_outputs))
    if backend.step_recorder is not None and plan.program is not None and not check and not dynamic_extent:
        plan.step = backend.step_recorder(plan)  # records the step once and replays it (the gpu backend's graphs)
    return plan


def order_dependencies(job: Job, order: list[Node], registries: "Registries") -> list[set[int]]:
    """``dependencies`` by position in ``order``."""
    deps, _ = dependencies(job, registries)
    position = {id(node): p for p, node in enumerate(order)}
    by_position: list[set[int]] = [set() for _ in order]
    for i, node in enumerate(job.nodes):
        by_position[position[id(node)]] = {position[id(job.nodes[d])] for d in deps[i]}
    return by_position


def _section_source(number: int, section: Section, lane_plan: LanePlan, order: list[Node], calls: dict[int, str],
                    var: Callable[[str], str], lines: list[str], line_nodes: dict[int, Node]) -> None:
    """Append one section of the step: a chain's calls in order, or a function per lane run by ``_lanes``."""
    if not section.parallel:
        for position in section.lanes[0]:
            if position in calls:
                lines.append(f"    {calls[position]}")
                line_nodes[len(lines)] = order[position]
        return
    made = [var(o) for p in range(section.start, section.stop) if p in calls for o in order[p].outputs]
    signals = sorted(p for p in lane_plan.signalled if section.start <= p < section.stop)
    slot = {p: k for k, p in enumerate(signals)}
    if made:
        lines.append(f"    {' = '.join(made)} = None")  # bound here, so the lanes can assign them (nonlocal)
    lines.append(f"    s{number} = _Signals({len(signals)})")
    names = []
    for k, lane in enumerate(section.lanes):
        name = f"lane{number}_{k}"
        names.append(name)
        lines.append(f"    def {name}():")
        own = [var(o) for p in lane if p in calls for o in order[p].outputs]
        if own:
            lines.append(f"        nonlocal {', '.join(own)}")
        for position in lane:
            for d in lane_plan.waits.get(position, ()):
                lines.append(f"        s{number}.wait({slot[d]})")
            if position in calls:
                lines.append(f"        {calls[position]}")
                line_nodes[len(lines)] = order[position]
            if position in slot:
                lines.append(f"        s{number}.set({slot[position]})")
        lines.append("        return None")
    lines.append(f"    _lanes(({', '.join(names)},), s{number}.abort)")
def _holds_dynamic_extent(order: "list[Node]", registries: "Registries") -> bool:
    """Whether an op of the plan declares a data-dependent extent (``OpDef.shape.dynamic_extent``, argwhere)."""
    ops = registries.ops
    return any(ops[node.op].shape.dynamic_extent for node in order if node.op != "input")


def _side_consumers(job: Job, bindings: Bindings) -> list[Callable[[Any], None]]:
    """The callables the side outputs' keys name, in side-output order (the order values are delivered)."""
    return [bindings.consumer(s.consumer, f"job {job.name!r}, side output {s.label or s.lbn!r}")
            for s in job.side_outputs]
