"""The consistent view over ranks: each rank computes its rows of every fed global batch.

Pass ``mpi-split`` (phase ``verify``, before autodiff) puts an ``mpi_split`` node after each
placeholder with a batch axis, so the body's ops read this rank's rows, and infers their shapes
again for those rows; autodiff then builds this rank's gradient graph (its 1/n loss scale too).
Returned values get their global form back: a value that still carries the batch is all-gathered
in rank order; a value the batch was reduced away from (``reduce_mean`` / ``reduce_sum``, then
only ops linear in it) is all-reduced with the matching weight; a value the batch never reached
is the same on every rank. Anything else is refused, naming the op. The weight each rank's
gradients take in the all-reduce (``mpi-allreduce``) follows from the loss the same way.

A reader's outputs (``readers``) are already this rank's rows: each rank reads its own records.

A job with mirrored arguments (``tp.ListNumpy``) is not split: each rank feeds its own shard and gets
its own results, and its gradients are averaged over ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowjob_core import BlobSpec
from flowjob_core.trace.builder import JobBuilder
from flowjob_core.plan.actual_shapes import DynamicShapeError, reshaped
from flowjob_core.ir.job import Intent, Job, Node

from flowjob_mpi.boxing import laid_out
from flowjob_mpi.placements import placed
from flowjob_mpi.readers import infer_global, sharded_sources
from flowjob_mpi.errors import MpiError
from flowjob_mpi.world import World, world

WEIGHT_INTENT = "mpi-gradient-weight"
# ops whose output depends linearly on a batch-reduced input (the other inputs being the same on every
# rank), so the sum over ranks of each rank's partial value, weighted, is the global value
LINEAR = frozenset({"return", "identity", "scalar_mul", "scalar_div", "reshape", "negative", "transpose",
                    "reduce_sum", "reduce_mean", "add_n", "add", "subtract"})
# of those, ops that may also add a value the same on every rank: right for an average (the rank
# weights sum to one), wrong for a sum (it would be added once per rank)
AFFINE = frozenset({"add", "subtract", "add_n"})

@dataclass(frozen=True)
class Form:
    """How a value of this rank relates to the global one."""

    kind: str  # "same" (no batch reached it), "split" (rows along axis), "mean" / "sum" (batch reduced away)
    axis: int = 0
    fraction: float = 1.0  # this rank's share of the batch (its rows / global rows)


def split_batch(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    w = world()
    if w.size == 1 or laid_out(job) or placed(job):  # spread by the boxing pass (boxing.py), or placements.py
        return
    readers = sharded_sources(job, w)  # a reader's outputs are already this rank's rows (readers.py)
    if not job.placeholders and not readers:
        return
    function = ctx.session.functions.get(job.name)
    if any(_mirrored(p.kind) for p in getattr(function, "params", ())):
        # the mirrored view: every rank feeds its own shard (one array per device of the rank) and keeps its
        # own results; the ranks' gradients are averaged, as the devices' shards are within one process
        job.intents.append(Intent(WEIGHT_INTENT, {"weight": 1.0 / w.size}, "flowjob-mpi"))
        return
    global_specs = dict(job.specs)
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    renamed: dict[str, str] = {}
    splits_of: list[list[int]] = []  # each split placeholder's rows per rank
    for p in job.placeholders:
        if p.batch_axis is None or not p.spec.shape:
            continue  # fed whole to every rank
        rows = p.spec.shape[p.batch_axis]
        if rows < w.size:
            raise MpiError(f"global function {job.name!r}, argument {p.param!r}: its batch of {rows} row(s) "
                           f"cannot be split over {w.size} ranks; feed at least {w.size} rows")
        counts = [rows // w.size + (1 if r < rows % w.size else 0) for r in range(w.size)]
        splits_of.append(counts)
        attrs = {"axis": p.batch_axis, "start": sum(counts[:w.rank]), "count": counts[w.rank]}
        (piece,) = builder.add_op("mpi_split", [builder.blob(p.lbn)], attrs,
                                  scoped_name=builder.local_name(f"{p.name}-mpi_split"),
                                  source=f"parameter {p.param!r}")
        _move_after(job, piece.lbn, p.lbn)
        renamed[p.lbn] = piece.lbn
        global_specs[piece.lbn] = p.spec  # what the rank's rows stand for
    for lbn, (spec, counts) in readers.items():
        global_specs[lbn] = spec
        splits_of.append(counts)
    if not renamed and not readers:
        return
    splits = set(renamed.values())
    for i, node in enumerate(job.nodes):
        if node.op != "mpi_split" and any(x in renamed for x in node.inputs):
            job.nodes[i] = Node(node.op, node.name, tuple(renamed.get(x, x) for x in node.inputs), node.outputs,
                                node.attrs, node.device, node.source)
    reached = _infer_again(job, ctx, global_specs, splits)
    reached |= infer_global(job, ctx, global_specs, set(readers))
    forms = _Forms(job, global_specs, reached, w, splits_of)
    _globalize_returns(job, builder, forms)
    ctx.flowjob_mpi_forms = forms  # for mpi-watch, later in this run of the passes (the job is data only)
    weights = {forms.gradient_weight(loss) for loss in job.losses}
    if len(weights) > 1:
        raise MpiError(f"train job {job.name!r}: its losses {job.losses} relate to the batch in different ways "
                       f"(rank weights {sorted(weights)}); use losses that all keep the batch, or all average it")
    if weights:
        job.intents.append(Intent(WEIGHT_INTENT, {"weight": weights.pop()}, "flowjob-mpi"))


def _mirrored(kind: Any) -> bool:
    """Whether a parameter kind (flowjob-typing's) takes one array per device, itself or inside a tuple."""
    if type(kind).__name__ == "ListParam":
        return True
    return any(_mirrored(item) for item in getattr(kind, "items", ()))


def _move_after(job: Job, lbn: str, after: str) -> None:
    node = job.nodes.pop()  # the node add_op just appended: job order is the schedule, so it goes after its input
    at = next(i for i, n in enumerate(job.nodes) if after in n.outputs)
    job.nodes.insert(at + 1, node)
    assert lbn in node.outputs


def _infer_again(job: Job, ctx: Any, global_specs: dict[str, BlobSpec], splits: set[str]) -> set[str]:
    """Shapes inferred again, in job order, for every node the rows reach; returns the reached values."""
    ops = ctx.registries.ops
    reached = set(splits)
    for i, node in enumerate(job.nodes):
        if node.op == "mpi_split" or not any(x in reached for x in node.inputs):
            continue
        ins = tuple(job.specs[x] for x in node.inputs)
        where = (f"global function {job.name!r}, op {node.name!r} ({node.op}) at {node.source}, computing this "
                 f"rank's rows with input shapes {[s.shape for s in ins]}")
        if ops[node.op].shape.fixed_shape:  # its traced target shape cannot follow other rows
            raise MpiError(f"{where}: its target shape {node.attrs.get('shape')} was fixed when the job was traced "
                           f"for the global batch, so it cannot follow a rank's rows")
        attrs = node.attrs
        if node.op == "reshape":
            before = tuple(global_specs[node.inputs[0]].shape)
            if before != ins[0].shape:
                try:
                    target = reshaped(before, ins[0].shape, tuple(global_specs[node.outputs[0]].shape), where)
                except DynamicShapeError as exc:
                    raise MpiError(str(exc).replace("dynamic", "split")) from None
                attrs = {**attrs, "shape": target}
        try:
            outs = ops[node.op].infer(ins, attrs)
        except Exception as exc:  # ShapeError and the plain checks ops make
            raise MpiError(f"{where}: the op cannot take a rank's rows: {exc}") from None
        for lbn, spec in zip(node.outputs, outs):
            job.specs[lbn] = spec
            reached.add(lbn)
        if attrs is not node.attrs:
            job.nodes[i] = Node(node.op, node.name, node.inputs, node.outputs, attrs, node.device, node.source)
    return reached


class _Forms:
    def __init__(self, job: Job, global_specs: dict[str, BlobSpec], reached: set[str], w: World,
                 splits: list[list[int]]) -> None:
        self.job, self.global_specs, self.reached, self.world, self.splits = job, global_specs, reached, w, splits
        self.producer = job.producer()

    def counts(self, lbn: str, axis: int) -> list[int]:
        """Every rank's extent of a split value along ``axis``, known without asking the other ranks:
        shapes follow the batch in proportion (a flattened (n, 28, 28) is n * 784 long)."""
        whole, mine = self.global_specs[lbn].shape[axis], self.job.specs[lbn].shape[axis]
        for counts in self.splits:
            rows = sum(counts)
            if whole % rows == 0 and counts[self.world.rank] * (whole // rows) == mine:
                return [c * (whole // rows) for c in counts]
        raise MpiError(f"global function {self.job.name!r}: value {lbn!r} has {mine} of {whole} entries along axis "
                       f"{axis} on rank {self.world.rank}, not in proportion to its rows of the batch")

    def _changed_axis(self, lbn: str) -> int | None:
        local, whole = self.job.specs[lbn].shape, self.global_specs[lbn].shape
        axes = [k for k, (a, b) in enumerate(zip(local, whole)) if a != b]
        if len(local) != len(whole) or len(axes) > 1:
            raise MpiError(f"global function {self.job.name!r}: value {lbn!r} has shape {local} on this rank and "
                           f"{whole} for the global batch; only one axis may follow the batch")
        return axes[0] if axes else None

    def of(self, lbn: str) -> Form:
        if lbn not in self.reached:
            return Form("same")
        axis = self._changed_axis(lbn)
        if axis is not None:
            return Form("split", axis, self.job.specs[lbn].shape[axis] / self.global_specs[lbn].shape[axis])
        return self._reduced(lbn)

    def _reduced(self, lbn: str) -> Form:
        """A value the batch reached but whose shape does not follow it: where and how it was reduced away."""
        found: set[Form] = set()
        affine_at = ""
        stack, seen = [lbn], set()
        while stack:
            value = stack.pop()
            if value in seen:
                continue
            seen.add(value)
            node = self.producer[value]
            where = f"global function {self.job.name!r}, op {node.name!r} ({node.op}) at {node.source}"
            if node.op in AFFINE and any(x not in self.reached for x in node.inputs):
                affine_at = where
            for x in node.inputs:
                if x not in self.reached:
                    continue
                axis = self._changed_axis(x)
                if axis is None:
                    if node.op not in LINEAR:
                        raise MpiError(f"{where}: the value {lbn!r} depends on the batch through this op, which is "
                                       f"not linear, so no combination of the ranks' values gives the global one; "
                                       f"return per-row values (the batch axis) instead")
                    stack.append(x)
                    continue
                if node.op not in ("reduce_mean", "reduce_sum"):
                    raise MpiError(f"{where}: reduces the batch axis of {x!r} in a way the ranks cannot combine "
                                   f"(only reduce_mean and reduce_sum can); return per-row values instead")
                fraction = self.job.specs[x].shape[axis] / self.global_specs[x].shape[axis]
                found.add(Form("mean", axis, fraction) if node.op == "reduce_mean" else Form("sum"))
        if len(found) != 1:
            raise MpiError(f"global function {self.job.name!r}: value {lbn!r} mixes batch reductions "
                           f"{sorted(f'{f.kind} of {f.fraction:g} of the rows' for f in found)}; the ranks cannot "
                           f"combine it")
        form = found.pop()
        if form.kind == "sum" and affine_at:
            raise MpiError(f"{affine_at}: adds a value that is the same on every rank to a sum over the batch, so "
                           f"the ranks' sum would count it once per rank; return per-row values instead")
        return form

    def raw_gradient_weight(self) -> float:
        """The rank weight that sums its raw gradients (loss seeded with ones, before 1/n) of values the batch
        does not split, such as a variable's, into the raw gradient one process computes."""
        forms = {self.of(loss) for loss in self.job.losses}
        form = forms.pop() if len(forms) == 1 else Form("same")
        if form.kind == "mean":
            return form.fraction
        return 1.0 / self.world.size if form.kind == "same" else 1.0

    def gradient_weight(self, loss: str) -> float:
        """What this rank's 1/n-scaled gradients are multiplied by before they are summed over ranks."""
        form = self.of(loss)
        if form.kind in ("split", "mean"):
            return form.fraction  # n/N: the global gradient is scaled by 1/N
        if form.kind == "sum":
            return 1.0
        return 1.0 / self.world.size  # the same loss on every rank: the mean keeps it


def _globalize_returns(job: Job, builder: JobBuilder, forms: _Forms) -> None:
    for node in list(job.nodes):
        if node.op != "return" or node.inputs[0] not in forms.reached:
            continue
        value = node.inputs[0]
        form = forms.of(value)
        if form.kind == "split":
            counts = forms.counts(value, form.axis)
            (whole,) = builder.add_op("mpi_allgather", [builder.blob(value)], {"axis": form.axis, "counts": counts},
                                      scoped_name=builder.local_name(f"{node.name}-mpi_allgather"),
                                      source=node.source)
        else:
            weight = form.fraction if form.kind == "mean" else 1.0
            (whole,) = builder.add_op("mpi_allreduce", [builder.blob(value)], {"weight": weight},
                                      scoped_name=builder.local_name(f"{node.name}-mpi_allreduce"),
                                      source=node.source)
        added = job.nodes.pop()
        at = job.nodes.index(node)
        job.nodes.insert(at, added)
        job.nodes[at + 1] = Node(node.op, node.name, (whole.lbn,), node.outputs, node.attrs, node.device, node.source)
        job.specs[node.outputs[0]] = forms.global_specs[node.outputs[0]]
