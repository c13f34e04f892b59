"""Legacy's placements over the MPI ranks: which ranks ``flow.scope.placement(tag, "0:0-1")`` names, and a job
whose ops are placed on some of the ranks only.

**The mapping.** Legacy ran one process per machine, each driving ``flow.config.gpu_device_num(d)`` (else
``cpu_device_num(d)``) devices, and a placement named devices as ``"machine:first-last"``. flowjob runs one
rank per device (a rank computes as one device), so the world's ranks stand for the program's devices, numbered
machine by machine::

    rank = (machine * devices_per_machine + device) // devices_per_rank

with ``devices_per_machine`` = ``gpu_device_num`` when set (and not 0), else ``cpu_device_num`` (whatever the
placement's tag: a rank runs its ops on its own backend), and the machines: those ``flow.env.machine`` lists (else
``flow.config.machine_num``), else the world's hosts when it has several, else (every rank on one host, as ``mpiexec
-n R`` and ``python -m oneflow launch -n R`` start them) ``R / devices_per_machine`` machines when that divides,
else one machine. ``devices_per_rank`` = machines * devices_per_machine / R: 1 when there are as many ranks as
devices; more when a rank stands for several devices of its machine (``cpu_device_num(4)`` on 2 ranks: devices 0-1
are rank 0's, 2-3 rank 1's), which then compute as one. So on 2 ranks ``gpu_device_num(2)`` with ``"0:0"`` and
``"0:1"`` names rank 0 and rank 1, as do ``"0:0"`` and ``"1:0"`` with one device per machine. Where the machines are
the world's hosts, a machine's ranks are those its host runs, in rank order, whatever order the launcher dealt
them out in (each host must run as many).

A placement naming a machine or device the program does not have, or device counts the ranks cannot hold (3
devices on 2 ranks), is a :class:`PlacementError` naming the job, the placement and the op. In one process
(a world of one, where this plugin adds nothing) every placement runs on the process.

**Ops on some of the ranks** (``mpi-placements``, phase ``verify``, records each placed node's ranks in
``Job.ranks``; ``mpi-run-placed``, phase ``transform``, rewrites the job for this rank). A job with a node placed
on only some of the ranks is neither split by batch (``mpi-split``, ``mpi-allreduce``) nor laid out
(``mpi-boxing``): every value is whole, computed by the ranks of its op's placement only. Each node runs on:

- placeholders (every rank is fed the global batch), variables (every rank holds each variable, so checkpoints and
  ``numpy()`` work as before), updates of variables (each rank updates its copy with the same gradient), returns:
  every rank;
- a node traced in a placement (autodiff places a gradient node with its forward node): the placement's ranks;
- any other node (the loss seed, the learning rate): the job's default placement (``default_placement_scope``),
  else every rank.

Where a node needs a value its producer's ranks do not hold, the lowest rank holding it sends it to each rank
lacking it (``mpi_send`` / ``mpi_recv``, right before the first reader), so the values every rank ends with are one
process's. The transfers are planned alike on every rank from the whole job; each rank then keeps its own nodes,
its sends and its receives, in job order: the pairs meet in the same order on both ends. A step check
(``mpi_step_check``) after the placeholders stops every rank, naming what each ran, when the ranks run different
placed jobs or were fed different batches.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, switches
from flowjob_core.api import env
from flowjob_core.ir.job import Job, Node
from flowjob_core.trace.scope import DEVICE_IDS

from flowjob_mpi.errors import MpiError
from flowjob_mpi.faults import WAITING
from flowjob_mpi.readers import sharded_sources
from flowjob_mpi.world import World, world


class PlacementError(MpiError):
    """A placement the world's ranks cannot run: devices it does not have, or counts the ranks cannot hold."""


@dataclass(frozen=True)
class Grid:
    """The program's devices (``machines`` x ``devices`` per machine) over ``ranks`` ranks."""

    machines: int
    devices: int
    ranks: int
    counted_by: str = "cpu_device_num"  # which setting gave ``devices``: error messages name it
    # where the machines are the world's hosts: each host's ranks, in rank order (a launcher may deal the ranks
    # out to the hosts in turn); None: machine m's ranks follow one another
    machine_ranks: tuple[tuple[int, ...], ...] | None = None

    @property
    def devices_per_rank(self) -> int:
        return self.machines * self.devices // self.ranks

    def rank_of(self, machine: int, device: int) -> int:
        if self.machine_ranks is not None:
            return self.machine_ranks[machine][device // self.devices_per_rank]
        return (machine * self.devices + device) // self.devices_per_rank

    def ranks_of(self, machine_device_ids: Iterable[str]) -> tuple[int, ...]:
        """The ranks holding the devices ``machine_device_ids`` name (``"0:0-1"``), sorted; a ``ValueError``
        naming the first machine or device the program does not have."""
        found: set[int] = set()
        for ids in machine_device_ids:
            match = DEVICE_IDS.match(ids)
            if match is None:
                raise ValueError(f"{ids!r} is not a machine:devices string such as '0:0' or '0:0-3'")
            machine, low, high = int(match.group(1)), int(match.group(2)), int(match.group(3) or match.group(2))
            if high < low:
                raise ValueError(f"{ids!r}: its device range {low}-{high} is empty")
            if machine >= self.machines:
                raise ValueError(f"{ids!r} names machine {machine}, but the program has {self.machines} machine(s) "
                                 f"({self._described()})")
            if high >= self.devices:
                raise ValueError(f"{ids!r} names device {high} of machine {machine}, but each machine has "
                                 f"{self.devices} device(s) (flow.config.{self.counted_by}({self.devices}); "
                                 f"{self._described()})")
            found.update(self.rank_of(machine, d) for d in range(low, high + 1))
        return tuple(sorted(found))

    def _described(self) -> str:
        per = self.devices_per_rank
        return (f"{self.ranks} rank(s) stand for {self.machines} machine(s) x {self.devices} device(s), "
                f"{per} device(s) per rank")


def grid(ranks: int, hosts: int, devices: int, declared_machines: int = 0,
         counted_by: str = "cpu_device_num", rank_hosts: Sequence[int] = ()) -> Grid:
    """The mapping of the module docstring: ``ranks`` ranks on ``hosts`` hosts (``rank_hosts``: each rank's host,
    where known), ``devices`` per machine, the machines the program declared (0: none). A ``ValueError`` where the
    ranks cannot hold the devices."""
    if ranks < 1 or hosts < 1 or devices < 1:
        raise ValueError(f"ranks, hosts and devices must be positive, got {ranks}, {hosts}, {devices}")
    if declared_machines:
        machines = declared_machines
    elif hosts > 1:
        machines = hosts
    else:
        machines = ranks // devices if ranks >= devices and ranks % devices == 0 else 1
    total = machines * devices
    if total % ranks or devices % (total // ranks):
        raise ValueError(f"{machines} machine(s) x {devices} device(s) (flow.config.{counted_by}({devices})) do "
                         f"not lie evenly on {ranks} rank(s): each rank stands for one device, or for the same "
                         f"number of devices of one machine; start as many ranks as devices (python -m oneflow "
                         f"launch -n {total}) or set the device count to a multiple of the ranks per machine")
    machine_ranks = None
    if hosts > 1 and machines == hosts and len(rank_hosts) == ranks:
        machine_ranks = tuple(tuple(r for r, h in enumerate(rank_hosts) if h == m) for m in range(hosts))
        counts = sorted({len(on_host) for on_host in machine_ranks})
        if counts != [ranks // hosts]:
            raise ValueError(f"the hosts run different numbers of ranks ({[len(h) for h in machine_ranks]}), so "
                             f"their devices cannot be numbered alike; start as many ranks on every host")
    return Grid(machines, devices, ranks, counted_by, machine_ranks)


def grid_of(session: Any, w: World) -> Grid:
    """The grid of this session's program on world ``w``: its device counts and declared machines."""
    config = session.config
    counted_by = "gpu_device_num" if config.gpu_device_num else "cpu_device_num"
    devices = config.gpu_device_num or config.cpu_device_num or 1
    return grid(w.size, w.hosts, devices, declared_machines(session), counted_by, w.rank_hosts)


def declared_machines(session: Any) -> int:
    """The machines the program named: ``flow.env.machine``'s list, else ``flow.config.machine_num``; 0: none."""
    return len(env.machines()) or getattr(session.config, "machine_num", None) or 0


def placed(job: Job) -> bool:
    """Whether a node of the job runs on only some of the ranks (``mpi-placements`` found one): then this module,
    not the data-parallel or boxing passes, spreads the job over the ranks."""
    size = world().size
    return any(len(ranks) < size for ranks in job.ranks.values())


def _where(job: Job, node: Node) -> str:
    tag_ids = f"placement ({node.device!r}, {', '.join(node.placement)!r})"
    return (f"global function {job.name!r}, {tag_ids} of op {node.name!r} ({node.op})"
            + (f" at {node.source}" if node.source else ""))


def resolve(job: Job, ctx: Any) -> None:
    """Pass ``mpi-placements`` (phase ``verify``): each node traced in a placement gets its ranks (``Job.ranks``);
    a job placing a node on some of the ranks only is checked for what this module cannot run."""
    w = world()
    if w.size == 1:
        return
    traced = [node for node in job.nodes if node.placement]
    declared = declared_machines(ctx.session)
    if not traced and declared in (0, w.machines):
        return
    try:
        devices = grid_of(ctx.session, w)
    except ValueError as exc:
        # fewer machines than ranks (flow.config.machine_num(1) on 2 ranks) need the devices the ranks stand for
        where = _where(job, traced[0]) if traced else f"global function {job.name!r}, {declared} machine(s) declared"
        raise PlacementError(f"{where}: {exc}") from None
    if not traced:
        return
    for node in traced:
        try:
            job.ranks[node.name] = devices.ranks_of(node.placement)
        except ValueError as exc:
            raise PlacementError(f"{_where(job, node)}: {exc}") from None
    partial = next((node for node in traced if len(job.ranks[node.name]) < w.size), None)
    if partial is None:
        return
    where = _where(job, partial)
    spread = sorted(lbn for lbn, layout in job.layouts.items() if getattr(layout, "kind", "") != "broadcast")
    if spread:
        raise PlacementError(f"{where}: runs on ranks {list(job.ranks[partial.name])} of {w.size}, and the job "
                             f"declares blobs split or partial over every rank ({spread}); a job with ops on some "
                             f"of the ranks computes whole values only: place it on every rank, or declare no split")
    function = ctx.session.functions.get(job.name)
    mirrored = [p.name for p in getattr(function, "params", ()) if _takes_devices(p.kind)]
    if mirrored:
        raise PlacementError(f"{where}: runs on ranks {list(job.ranks[partial.name])} of {w.size}, and arguments "
                             f"{mirrored} are mirrored (one array per device); ops on some of the ranks are built "
                             f"for the consistent view: feed tp.Numpy arguments")
    readers = sharded_sources(job, w)
    if readers:
        raise PlacementError(f"{where}: runs on ranks {list(job.ranks[partial.name])} of {w.size}, and the job reads "
                             f"{sorted(readers)} with a reader that reads each rank's own records; feed the batches "
                             f"through placeholders")


def _takes_devices(kind: Any) -> bool:
    """Whether a parameter kind (flowjob-typing's) takes one array per device, itself or inside a tuple."""
    return type(kind).__name__ == "ListParam" or any(_takes_devices(item) for item in getattr(kind, "items", ()))


def _everywhere(node: Node, ops: Any) -> bool:
    """Nodes every rank runs: placeholders and variables (every rank holds them), their updates, returns."""
    return node.op in ("input", "variable", "return") or bool(ops[node.op].effects.mutates)


def run_placed(job: Job, ctx: Any) -> None:
    """Pass ``mpi-run-placed`` (phase ``transform``): this rank's part of a job placed on some of the ranks, with
    the sends and receives between placements (see the module docstring)."""
    w = world()
    if w.size == 1 or not job.ranks:
        return
    devices = grid_of(ctx.session, w)  # resolve() read it already: it cannot fail here
    if not placed(job):  # every placement names every rank: the nodes passes added in one (gradients) are mapped
        for node in job.nodes:  # for the printed job; they run as the other passes laid them out
            if node.placement and node.name not in job.ranks:
                job.ranks[node.name] = devices.ranks_of(node.placement)
        return
    ops = ctx.registries.ops
    every = tuple(range(w.size))
    default = job.config.get("default_placement_scope")
    try:
        fallback = devices.ranks_of(default.machine_device_ids) if default is not None else every
    except ValueError as exc:
        raise PlacementError(f"global function {job.name!r}, its default_placement_scope "
                             f"{list(default.machine_device_ids)}: {exc}") from None
    mapped: dict[tuple[str, ...], tuple[int, ...]] = {}
    holders: dict[str, set[int]] = {}
    nodes: list[Node] = []
    planned: list[tuple] = []  # every transfer of the job, alike on every rank: what the step check compares
    transfers = 0

    def bring(lbn: str, to: Sequence[int], reader: str) -> None:
        nonlocal transfers
        held = holders[lbn]
        lacking = [r for r in to if r not in held]
        if not lacking:
            return
        source = min(held)
        stem = f"{lbn.replace('/', '-')}-to-{'_'.join(map(str, lacking))}"
        tag = transfers % TAGS
        transfers += 1
        attrs = {"tag": tag, "reader": reader}
        device = producer_device.get(lbn, "cpu")
        planned.append((lbn, source, lacking, job.specs[lbn].shape, job.specs[lbn].dtype.name))
        if w.rank == source:
            nodes.append(Node("mpi_send", f"{stem}-mpi_send", (lbn,), (), {**attrs, "to": lacking}, device,
                              "flowjob-mpi placements"))
            job.ranks[f"{stem}-mpi_send"] = (source,)
        elif w.rank in lacking:
            spec = job.specs[lbn]
            nodes.append(Node("mpi_recv", f"{stem}-mpi_recv", (), (lbn,),
                              {**attrs, "source": source, "shape": spec.shape, "dtype": spec.dtype.name}, device,
                              "flowjob-mpi placements"))
            job.ranks[f"{stem}-mpi_recv"] = tuple(lacking)
        held.update(lacking)

    producer_device: dict[str, str] = {}
    for node in job.nodes:
        if _everywhere(node, ops):
            runs = every
        elif node.placement:  # traced in a placement, or a gradient node of one (added after resolve())
            if node.placement not in mapped:
                try:
                    mapped[node.placement] = devices.ranks_of(node.placement)
                except ValueError as exc:
                    raise PlacementError(f"{_where(job, node)}: {exc}") from None
            runs = mapped[node.placement]
        else:
            runs = tuple(fallback)
        job.ranks[node.name] = runs
        for lbn in dict.fromkeys(node.inputs):
            bring(lbn, runs, node.name)
        for lbn in node.outputs:
            holders[lbn] = set(runs)
            producer_device[lbn] = node.device
        if w.rank in runs:
            nodes.append(node)
    for lbn in dict.fromkeys(job.losses + [side.lbn for side in job.side_outputs]):
        bring(lbn, every, "the job's results")
    _check_steps(job, ctx, nodes, planned)
    kept = {node.name for node in nodes}
    job.ranks = {name: ranks for name, ranks in job.ranks.items() if name in kept}
    job.nodes = nodes


def _check_steps(job: Job, ctx: Any, nodes: list[Node], planned: list[tuple]) -> None:
    """``mpi_step_check`` (flowjob_mpi.agreement) after the placeholders: every rank runs the same step of the same
    placed job (with the same transfers) and was fed the same global batch, else all stop naming what each ran.
    Without it, ranks running different jobs would wait in each other's receives for ever."""
    compare = "digest" if getattr(ctx.session.config, "debug_mode", False) else \
        "fingerprint" if switches.current().mpi_feed_check else None
    attrs: dict[str, Any] = {"job": job.name, "layout": hashlib.sha256(repr(planned).encode()).hexdigest()[:16]}
    inputs: tuple[str, ...] = ()
    if compare is not None and job.placeholders:
        inputs = tuple(p.lbn for p in job.placeholders)
        attrs.update(feeds=[p.param or p.name for p in job.placeholders], compare=compare)
    first = max((i + 1 for i, node in enumerate(nodes) if node.op == "input"), default=0)
    device = nodes[0].device if nodes else "cpu"
    nodes.insert(first, Node("mpi_step_check", "System-MPI-StepCheck", inputs, (), attrs, device, "flowjob-mpi"))
    job.ranks["System-MPI-StepCheck"] = tuple(range(world().size))


TAGS = 32767  # MPI guarantees tags up to 32767; a job's transfers pair in order anyway, the tag is a check


def _send_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return []


def _send_kernel(ctx: KernelContext) -> Callable[[Any], None]:
    comm = world().comm
    to, tag, host = [int(r) for r in ctx.attrs["to"]], int(ctx.attrs["tag"]), ctx.backend.to_host
    what = f"the send of node {ctx.node_name!r} to rank(s) {to}"

    def run(x: Any) -> None:
        data = np.ascontiguousarray(host(x))
        WAITING.enter(what)
        for rank in to:
            comm.Send(data, dest=rank, tag=tag)
        WAITING.leave()

    return run


def _recv_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec(tuple(attrs["shape"]), np.dtype(attrs["dtype"]))]


def _recv_kernel(ctx: KernelContext) -> Callable[[], Any]:
    comm = world().comm
    source, tag = int(ctx.attrs["source"]), int(ctx.attrs["tag"])
    spec = ctx.outputs[0]
    buffer = np.empty(spec.shape, dtype=spec.dtype)
    out, device, host_arrays = ctx.out(0), ctx.backend.from_host, ctx.backend.host_arrays
    what = f"the receive of node {ctx.node_name!r} from rank {source}"

    def run() -> Any:
        WAITING.enter(what)
        comm.Recv(buffer, source=source, tag=tag)
        WAITING.leave()
        if host_arrays:
            np.copyto(out, buffer)
        else:
            out[...] = device(buffer)
        return out

    return run


MPI_SEND = OpDef("mpi_send", _send_infer, kernel=_send_kernel, not_differentiable=True,
                 doc="sends its input to the ranks 'to' (attr tag), which receive it with mpi_recv",
                 effects=Effects(ordered=True, effect=True))
MPI_RECV = OpDef("mpi_recv", _recv_infer, kernel=_recv_kernel, not_differentiable=True,
                 doc="the value rank 'source' sends with mpi_send (attr tag), of attrs shape and dtype, under the "
                     "lbn it has there", effects=Effects(ordered=True))

OPS = (MPI_SEND, MPI_RECV)

