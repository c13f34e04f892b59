"""Pass ``mpi-boxing`` (phase ``update``, before ``optimizer``): the consistent view of a job whose body declared
layouts (a variable ``get_variable(..., distribute=flow.distribute.split(axis))``, ``blob.with_distribute``).

It runs after autodiff, on the whole logical graph (forward and backward), as legacy chose SBP signatures for
the complete job: so a boxing node never needs a gradient of its own. In job order, each value gets a layout
(``flowjob_core.ir.layout``): a placeholder is broadcast (every rank feeds the same global batch) and, where its
batch axis divides evenly, offered to its readers as that axis split (a view of the rank's rows), a variable
has its declared layout (broadcast by default), and each op takes the signature of its record
(``Compute.layouts``) that moves the fewest bytes to bring its inputs to the layouts the signature needs, plus, for
a variable's gradient, to its variable's layout; ties go to the signature the record lists first. Where an
input's layout differs, boxing nodes convert it:

    S(a) -> B   mpi_allgather along a            P -> B      mpi_allreduce (weight 1)
    B -> S(a)   mpi_split: this rank's slice      P -> S(a)   mpi_reduce_scatter along a
    S(a) -> S(b)  mpi_all_to_all (1/R of an all-gather's bytes)

Each node is then inferred again on this rank's pieces (a split variable's node holds its shard's shape), and a
signature computed by another record (``Signature.local_op``) becomes that record's node with ``shard_start`` /
``shard_stop`` (this rank's piece) and ``shard_size`` (the whole axis). Every value of the job keeps its layout
in ``Job.layouts`` (``python -m oneflow dump`` shows it).
Gradients are boxed to their variable's layout, so the optimizer updates each rank's shard with its shard's
gradient; its slots (momentum, ...) are split the same way (``split_slots``, after the optimizer). Every value
not split nor partial is computed whole and alike on every rank, so no gradient all-reduce follows (the data
parallel passes, ``mpi-split`` and ``mpi-allreduce``, leave such a job alone).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from flowjob_core import BlobSpec
from flowjob_core.ir.job import Job, Node
from flowjob_core.ir.layout import (
    BROADCAST, PARTIAL_SUM, Layout, Shard, Signature, boxing_bytes, shard_of, signatures_of, split)
from flowjob_core.trace.builder import JobBuilder

from flowjob_mpi.errors import MpiError
from flowjob_mpi.placements import placed
from flowjob_mpi.readers import sharded_sources
from flowjob_mpi.world import World, world


def laid_out(job: Job) -> bool:
    """Whether the job declared layouts: the boxing pass, not the data-parallel passes, spreads it over ranks."""
    return bool(job.layouts or job.gradient_layouts)


def box_layouts(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    w = world()
    if w.size == 1 or not laid_out(job) or placed(job):  # a job with ops on some ranks: placements.py
        return
    readers = sharded_sources(job, w)
    if readers:  # traced with the rank's own records: no value of the job stands for the whole batch
        raise MpiError(f"global function {job.name!r}: it declares layouts and reads {sorted(readers)} with a reader "
                       f"that reads each rank's own records; a job with layouts reads whole batches (feed them "
                       f"through placeholders), or declare no layout to train it data parallel")
    _agree_on_layouts(job, ctx.session.variables, w)
    _Boxing(job, ctx, w.rank, w.size).run()


AGREEMENT = "flowjob-mpi layouts"


def _agree_on_layouts(job: Job, store: Any, w: World) -> None:
    """Every rank plans the job with the same layout for each variable, else every rank stops naming the first
    variable they differ on. One all-gather when the job is planned (every rank plans its jobs at the same points
    of the same program): a rank splitting a table the others hold whole would otherwise train on garbage."""
    mine = {name: str(store[name].layout or BROADCAST) for name in sorted(job.variables)}
    everyone = w.allgather((AGREEMENT, job.name, mine))
    for r, theirs in enumerate(everyone):
        if not (isinstance(theirs, tuple) and len(theirs) == 3 and theirs[:2] == (AGREEMENT, job.name)):
            raise MpiError(f"global function {job.name!r}: rank {r} is not planning this job with declared layouts "
                           f"while this rank ({w.rank}) is; every rank must declare the same layouts")
    for name in sorted({n for _, _, layouts in everyone for n in layouts}):
        seen = [layouts.get(name, "absent") for _, _, layouts in everyone]
        if len(set(seen)) > 1:
            by_rank = ", ".join(f"rank {r}: {layout}" for r, layout in enumerate(seen))
            raise MpiError(f"global function {job.name!r}, variable {name!r}: the ranks declare it with different "
                           f"layouts ({by_rank}); every rank must declare it alike")


class _Boxing:
    def __init__(self, job: Job, ctx: Any, rank: int, ranks: int) -> None:
        self.job, self.ctx, self.rank, self.ranks = job, ctx, rank, ranks
        self.ops = ctx.registries.ops
        self.store = ctx.session.variables
        self.logical = dict(job.specs)
        self.declared = dict(job.layouts)
        self.have: dict[str, Layout] = {}
        self.boxed: dict[tuple[str, Layout], str] = {}
        self.whole_of: dict[str, str] = {}  # a slice made by mpi_split -> the whole (B) value it was cut from
        self.builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
        self.variable_of = {v.lbn: name for name, v in job.variables.items()}
        self.wanted = {grad: self._variable_layout(name) for name, grad in ctx.variable_grads.items()}
        self.gradient_of: dict[str, str] = {}  # a gradient given a layout -> the blob annotated
        for lbn, layout in job.gradient_layouts.items():  # blob.with_gradient_distribute
            grad = ctx.grads.get(lbn)
            if grad is not None:  # the gradient's producer prefers it, and its readers get it
                self.declared[grad] = self.wanted[grad] = layout
                self.gradient_of[grad] = lbn

    def _variable_layout(self, name: str) -> Layout:
        return self.store[name].layout or BROADCAST  # a hint on its blob (with_distribute) is boxed after it

    def run(self) -> None:
        job = self.job
        nodes, job.nodes = job.nodes, []  # boxing nodes the builder appends land right before their reader
        renamed: dict[str, str] = {}
        offered: set[str] = set()  # placeholders whose rows are offered to their readers: still whole underneath
        for node in nodes:
            node = dataclasses.replace(node, inputs=tuple(renamed.get(x, x) for x in node.inputs))
            if node.op == "variable":
                layouts: Sequence[Layout] = [self._variable(node)]
            elif node.op == "input":
                job.nodes.append(node)
                layouts = [BROADCAST]  # every rank is fed the same global batch, and reads its rows of it
                batch = self._batch_split(node.outputs[0])
                if batch is not None and node.outputs[0] not in self.declared:
                    self.declared[node.outputs[0]] = batch
                    offered.add(node.outputs[0])
            else:
                layouts = self._place(node)
            for lbn, layout in zip(node.outputs, layouts):
                self.have[lbn] = job.layouts[lbn] = layout
                hint = self.declared.get(lbn)
                if hint is not None and hint != layout:  # blob.with_distribute: its readers see that layout
                    blob = self.gradient_of.get(lbn)
                    where = (f"{self._where(node)}, output {lbn!r}" if blob is None else
                             f"{self._where(node)}, output {lbn!r}: the gradient of blob {blob!r} "
                             f"(with_gradient_distribute({hint}))")
                    renamed[lbn] = self.convert(lbn, hint, where)
                    if lbn not in offered:  # a declared layout is what readers box from, not the whole it was cut from
                        self.whole_of.pop(renamed[lbn], None)
        for name, grad in list(self.ctx.variable_grads.items()):
            self.ctx.variable_grads[name] = self.convert(
                grad, self._variable_layout(name), f"global function {job.name!r}, the gradient of variable {name!r}")

    def _batch_split(self, lbn: str) -> Layout | None:
        """The consistent view's layout of a placeholder: split along its batch axis when that divides evenly."""
        p = next((p for p in self.job.placeholders if p.lbn == lbn), None)
        if p is None or p.batch_axis is None or not p.spec.shape or p.spec.shape[p.batch_axis] % self.ranks:
            return None
        return split(p.batch_axis)

    def _where(self, node: Node) -> str:
        return f"global function {self.job.name!r}, op {node.name!r} ({node.op})" + (
            f" at {node.source}" if node.source else "")

    def _variable(self, node: Node) -> Layout:
        (lbn,) = node.outputs
        name = node.attrs["name"]
        stored = self.store[name]
        layout = stored.layout or BROADCAST
        if layout == PARTIAL_SUM:
            raise MpiError(f"global function {self.job.name!r}: variable {name!r} cannot be declared as partial sums")
        if stored.shard is not None:
            local = stored.local_spec
            node = dataclasses.replace(node, attrs={**node.attrs, "shape": local.shape})
            self.job.specs[lbn] = local
            self.job.variables[name] = dataclasses.replace(self.job.variables[name], spec=local)
        self.job.nodes.append(node)
        return layout

    def _place(self, node: Node) -> tuple[Layout, ...]:
        opdef = self.ops[node.op]
        where = self._where(node)
        ins = [self.logical[x] for x in node.inputs]
        outs = [self.logical[x] for x in node.outputs]
        try:
            candidates = [s for s in signatures_of(opdef, ins, outs, node.attrs) if self._even(s, ins, outs)]
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise MpiError(f"{where}: its layout rule failed: {exc}") from None
        # a slice of a whole value this rank still has (a placeholder's rows) reaches any other layout for free
        have = [BROADCAST if x in self.whole_of else self.have[x] for x in node.inputs]
        sig = self._choose(candidates, have, ins, outs, [self.wanted.get(x) for x in node.outputs])
        inputs = tuple(self.convert(x, want, f"{where}, input {x!r}") for x, want in zip(node.inputs, sig.inputs))
        op, attrs = node.op, node.attrs
        if sig.local_op is not None:
            # the piece of the first split input, else of the first split output (a gradient into a split table)
            layout, spec = next((lay, s) for lay, s in [*zip(sig.inputs, ins), *zip(sig.outputs, outs)] if lay.is_split)
            piece = shard_of(layout, spec, self.rank, self.ranks, where)
            assert piece is not None
            op, attrs = sig.local_op, {**attrs, "shard_start": piece.start, "shard_stop": piece.stop,
                                       "shard_size": spec.shape[piece.axis]}
        if sig.shape_attrs:
            attrs = dict(attrs)
            for name, k in sig.shape_attrs:
                piece = shard_of(sig.outputs[k], outs[k], self.rank, self.ranks, where)
                attrs[name] = outs[k].shape if piece is None else piece.local_shape(outs[k].shape)
        try:
            local = tuple(self.ops[op].infer(tuple(self.job.specs[x] for x in inputs), attrs))
        except Exception as exc:  # ShapeError and the plain checks the records make
            pieces = ", ".join(f"{blob!r} {self.job.specs[x].shape}" for blob, x in zip(node.inputs, inputs))
            raise MpiError(f"{where}: cannot run under the layouts {sig} on this rank's pieces of its inputs "
                           f"({pieces}): {exc}") from None
        for lbn, spec in zip(node.outputs, local):
            self.job.specs[lbn] = spec
        self.job.nodes.append(dataclasses.replace(node, op=op, inputs=inputs, attrs=attrs))
        return sig.outputs

    def _even(self, sig: Signature, ins: Sequence[BlobSpec], outs: Sequence[BlobSpec]) -> bool:
        """Whether every split of the signature divides its axis evenly over the ranks."""
        pairs = list(zip(sig.inputs, ins)) + list(zip(sig.outputs, outs))
        return all(not layout.is_split or (layout.axis is not None and layout.axis < len(spec.shape)
                                           and spec.shape[layout.axis] % self.ranks == 0)
                   for layout, spec in pairs)

    def _choose(self, candidates: Sequence[Signature], have: Sequence[Layout], ins: Sequence[BlobSpec],
                outs: Sequence[BlobSpec], wanted: Sequence[Layout | None]) -> Signature:
        best, best_cost = candidates[-1], float("inf")
        for sig in candidates:
            cost = sum(boxing_bytes(h, w, s, self.ranks) for h, w, s in zip(have, sig.inputs, ins))
            cost += sum(boxing_bytes(got, want, s, self.ranks)
                        for got, want, s in zip(sig.outputs, wanted, outs) if want is not None)
            if cost < best_cost:
                best, best_cost = sig, cost
        return best

    def convert(self, lbn: str, want: Layout, where: str) -> str:
        """``lbn`` laid out as ``want``: itself, or the output of the boxing nodes that make it so."""
        have = self.have[lbn]
        if have == want:
            return lbn
        known = self.boxed.get((lbn, want))
        if known is not None:
            return known
        whole = self.whole_of.get(lbn)
        if whole is not None:  # a slice of a whole value this rank still has: box from that, moving nothing
            return self.convert(whole, want, where)
        if want == PARTIAL_SUM:
            raise MpiError(f"{where}: a value laid out {have} cannot be made partial sums")
        logical = self.logical[lbn]
        stem = f"{lbn.split('/', 1)[0]}-boxing"
        value = lbn
        if have == PARTIAL_SUM and want.is_split:
            value = self._add("mpi_reduce_scatter", value, {"axis": want.axis, "ranks": self.ranks}, stem, logical)
            self.have[value] = self.job.layouts[value] = want
            self.boxed[(lbn, want)] = value
            return value
        if have.is_split and want.is_split:  # each rank sends the others only the blocks they keep
            self._piece(want, logical, where)  # the new axis must split evenly too
            value = self._add("mpi_all_to_all", value, {"split_axis": want.axis, "concat_axis": have.axis,
                                                        "ranks": self.ranks}, stem, logical)
            self.have[value] = self.job.layouts[value] = want
            self.boxed[(lbn, want)] = value
            return value
        if have == PARTIAL_SUM:
            value = self._add("mpi_allreduce", value, {"weight": 1.0}, stem, logical)
        elif have.is_split:
            count = logical.shape[int(have.axis or 0)] // self.ranks
            value = self._add("mpi_allgather", value, {"axis": have.axis, "counts": [count] * self.ranks}, stem,
                              logical)
        if value != lbn:
            self.have[value] = self.job.layouts[value] = BROADCAST
        if want.is_split:
            piece = self._piece(want, logical, where)
            whole = value
            value = self._add("mpi_split", value, {"axis": piece.axis, "start": piece.start,
                                                   "count": piece.stop - piece.start}, stem, logical)
            self.whole_of[value] = whole
        self.have[value] = self.job.layouts[value] = want
        self.boxed[(lbn, want)] = value
        return value

    def _piece(self, want: Layout, logical: BlobSpec, where: str) -> Shard:
        """This rank's piece of a value boxed to the split ``want``; a declared split that does not divide evenly
        (each rank's piece has one shape here) is an error naming where it was declared."""
        try:
            piece = shard_of(want, logical, self.rank, self.ranks, where)
        except ValueError as exc:
            raise MpiError(f"{exc}; a declared split must divide its axis evenly over the ranks") from None
        assert piece is not None
        return piece

    def _add(self, op: str, lbn: str, attrs: dict, stem: str, logical: BlobSpec) -> str:
        (out,) = self.builder.add_op(op, [self.builder.blob(lbn)], attrs, scoped_name=self.builder.local_name(stem),
                                     source="flowjob-mpi boxing")
        self.logical[out.lbn] = logical
        return out.lbn


def split_slots(job: Job, ctx: Any) -> None:
    """Pass ``mpi-split-slots`` (phase ``update``, after ``optimizer``): an optimizer's slots of a split variable
    (its momentum, Adam's moments: the update op's other in-place inputs) are split the same way. The optimizer made
    them in the shape of the shard it updates; the session now holds each as that shard of the whole slot, so
    checkpoints keep the whole slot."""
    if world().size == 1 or not laid_out(job):
        return
    store, ops = ctx.session.variables, ctx.registries.ops
    names = {v.lbn: name for name, v in job.variables.items()}
    split = sorted(name for name in job.variables if store[name].shard is not None)
    for node in job.nodes if split else ():
        # a norm or a finiteness check over all gradients would see only this rank's rows of a split one
        if node.op == "optim_clip_by_global_norm" or node.attrs.get("skip_if_not_finite"):
            what = "clipping by the global norm" if node.op == "optim_clip_by_global_norm" else "a dynamic loss scale"
            raise MpiError(f"global function {job.name!r}, op {node.name!r} ({node.op}): {what} over the gradients "
                           f"of split variables {split} is not built yet; train them without it, or declare the "
                           f"variables without a split")
    for node in job.nodes:
        mutated = ops[node.op].effects.mutates
        owner = names.get(node.inputs[0]) if mutated[:1] == (0,) and node.inputs else None
        if owner is None or store[owner].shard is None:
            continue
        variable = store[owner]
        for k in mutated[1:]:
            slot = names.get(node.inputs[k])
            if slot is None:
                continue
            if store[slot].shard is None:
                if store[slot].spec != variable.local_spec:
                    raise MpiError(f"global function {job.name!r}: slot {slot!r} of split variable {owner!r} has shape "
                                   f"{store[slot].spec.shape}, not the shard's {variable.local_spec.shape}")
                store.hold_as_shard(slot, variable.layout, variable.spec, variable.shard)
            job.layouts[node.inputs[k]] = variable.layout
