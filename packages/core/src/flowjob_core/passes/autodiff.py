"""Reverse-mode autodiff as a graph pass: gradient rules emit nodes into the job.

Fan-out is summed and broadcasting undone here, in one place, so rules stay simple.
Legacy semantics: the seed is ones for every loss element; the raw gradients are what
watch_diff shows; variable gradients are then scaled by 1/(number of loss elements).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from flowjob_core.trace.blob import Blob
from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import Job, Node
from flowjob_core.trace.builder import JobBuilder

if TYPE_CHECKING:
    from flowjob_core.passes.pipeline import PassContext


class GradContext:
    """What a gradient rule sees: the node, blob handles for its values, and a way to emit nodes."""

    def __init__(self, builder: JobBuilder, node: Node, out_grads: Sequence[Blob | None],
                 needs: Sequence[bool], data_rows: frozenset[str] = frozenset()) -> None:
        self.builder = builder
        self.node = node
        self.attrs = node.attrs
        self.inputs = tuple(builder.blob(lbn) for lbn in node.inputs)
        self.outputs = tuple(builder.blob(lbn) for lbn in node.outputs)
        self.out_grads = tuple(out_grads)
        self.needs = tuple(needs)
        self._data_rows = data_rows

    def rows_from_data(self, blob: Blob) -> bool:
        """Whether ``blob``'s actual shape is decided by the data at each step (it reads the rows of an op
        declaring ``OpDef.shape.dynamic_extent``, argwhere): a rule must then take shapes from blobs at run time
        (``broadcast_to_compatible_with``, ``reduced_shape_elem_cnt``), as legacy's ``*_like`` ops did,
        instead of fixing them from the traced shapes."""
        return blob.lbn in self._data_rows

    @property
    def dy(self) -> Blob:
        """The gradient of the single (or first) output."""
        grad = self.out_grads[0]
        if grad is None:
            raise FlowjobError(f"op {self.node.name!r}: no gradient reached output 0")
        return grad

    def apply(self, op_type: str, inputs: Sequence[Blob], attrs: dict[str, Any] | None = None) -> Any:
        """Emit a node for the gradient; named after the forward node, with no process-wide id."""
        name = self.builder.local_name(f"{self.node.name}_grad")
        outs = self.builder.add_op(op_type, inputs, attrs, scoped_name=name, source=self.node.source,
                                   device=self.node.device)
        return outs[0] if len(outs) == 1 else outs


def reachable_forward(job: Job, sources: set[str]) -> set[str]:
    reached = set(sources)
    for node in job.nodes:
        if any(lbn in reached for lbn in node.inputs):
            reached.update(node.outputs)
    return reached


def reachable_backward(job: Job, targets: set[str]) -> set[str]:
    reached = set(targets)
    for node in reversed(job.nodes):
        if any(lbn in reached for lbn in node.outputs):
            reached.update(node.inputs)
    return reached


def rows_from_data(nodes: Sequence[Node], ops: Any) -> frozenset[str]:
    """The values of ``nodes`` whose actual shape the data decide: the outputs of ops declaring
    ``OpDef.shape.dynamic_extent`` and every value computed from them, except past an op that keeps its
    traced shape (``OpDef.shape.traced_shape_from``) when the rows do not come through those inputs."""
    found: set[str] = set()
    for node in nodes:
        if node.op == "input":
            continue
        opdef = ops[node.op]
        reads = [i for i, lbn in enumerate(node.inputs) if lbn in found]
        through = opdef.shape.traced_shape_from
        if opdef.shape.dynamic_extent or (reads and (through is None or any(k in through for k in reads))):
            found.update(node.outputs)
    return frozenset(found)


def differentiate(job: Job, ctx: "PassContext") -> None:
    """Add gradient nodes for every trainable variable and every requested target of a train job."""
    if job.type != "train":
        if job.grad_targets:
            raise FlowjobError(
                f"job {job.name!r}: watch_diff needs a train job (type='train' with an optimizer), "
                f"this one is {job.type!r}")
        return
    if not job.losses:
        raise FlowjobError(f"train job {job.name!r} has no loss: call optimizer.minimize(loss) in its body")
    ops = ctx.registries.ops
    builder = JobBuilder(job, ctx.session)
    trainable = {v.lbn for v in job.variables.values() if v.trainable}
    sources = trainable | set(job.grad_targets)
    needs_grad = reachable_forward(job, sources) & reachable_backward(job, set(job.losses))
    for lbn in job.grad_targets:
        if lbn not in needs_grad:
            raise FlowjobError(
                f"job {job.name!r}: watch_diff({lbn!r}) has no gradient: the blob is not on the path "
                f"from a trainable variable or watched blob to the loss {job.losses}")

    pending: dict[str, list[Blob]] = {}
    for loss in job.losses:
        seed_name = builder.local_name(f"{loss.split('/')[0]}_grad_seed")
        seed = builder.add_op("ones_like", [builder.blob(loss)], scoped_name=seed_name)[0]
        pending.setdefault(loss, []).append(seed)
    for lbn, grad in propagate(builder, list(job.nodes), pending, needs_grad, ops).items():
        ctx.grads[lbn] = grad.lbn

    loss_elements = sum(job.specs[loss].size for loss in job.losses)
    data_rows = rows_from_data(job.nodes, ops)
    for vdef in job.variables.values():
        raw = ctx.grads.get(vdef.lbn)
        if raw is None or not vdef.trainable:
            continue
        if any(loss in data_rows for loss in job.losses):
            # legacy scaled by the loss instances of the step: count them as the step runs
            name = builder.local_name(f"{vdef.name}_grad_scaled")
            losses = [builder.blob(loss) for loss in job.losses]
            scaled = builder.add_op("scale_by_loss_count", [builder.blob(raw), *losses], scoped_name=name)[0]
            ctx.variable_grads[vdef.name] = scaled.lbn
            continue
        if loss_elements <= 1:  # one element: nothing to scale; none (an empty batch): the gradients are zeros
            ctx.variable_grads[vdef.name] = raw
            continue
        name = builder.local_name(f"{vdef.name}_grad_scaled")
        scaled = builder.add_op("scalar_mul", [builder.blob(raw)], {"scalar": 1.0 / loss_elements},
                                scoped_name=name)[0]
        ctx.variable_grads[vdef.name] = scaled.lbn


def propagate(builder: JobBuilder, forward_nodes: Sequence[Node], pending: dict[str, list[Blob]],
              needs_grad: set[str], ops: Any) -> dict[str, Blob]:
    """Run the gradient rules of ``forward_nodes`` backwards from the seeds in ``pending`` (lbn -> gradient
    parts), adding the gradient nodes through ``builder``; returns lbn -> total gradient, in the order the
    totals were formed, for every value in ``needs_grad`` that a gradient reached.

    The job-level pass and the eager tensors' autograd (``flowjob_core.imperative``) both run this sweep, so
    an eager gradient is built from the same rules, sums and unbroadcasts as a lazy one."""
    job = builder.job
    grads: dict[str, Blob] = {}
    data_rows = rows_from_data(forward_nodes, ops)

    def total(lbn: str) -> Blob | None:
        parts = pending.pop(lbn, None)
        if not parts:
            return None
        if len(parts) == 1:
            grad = parts[0]
        else:
            name = builder.local_name(f"{lbn.split('/')[0]}_grad_sum")
            grad = builder.add_op("add_n", parts, scoped_name=name)[0]
        grads[lbn] = grad
        return grad

    for node in reversed(forward_nodes):
        if not any(out in needs_grad for out in node.outputs) or not any(i in needs_grad for i in node.inputs):
            for out in node.outputs:
                if out in needs_grad:
                    total(out)  # a source's gradient (the variable itself) is complete here
            continue
        with builder.placed(node.placement):  # the sum of an output's gradient parts, where the output is
            out_grads = [total(out) for out in node.outputs]
        if all(g is None for g in out_grads):
            continue
        opdef = ops[node.op]
        if opdef.grad is None and all(g is None or job.specs[out].dtype.kind != "f"
                                      for out, g in zip(node.outputs, out_grads)):
            # only integer outputs bring a gradient (through a cast, which differentiates for every dtype as in
            # legacy): an op without a rule (a comparison, argmax) ends the path instead of failing the job
            continue
        if opdef.grad is None:
            why = "is marked not differentiable" if opdef.not_differentiable else "has no gradient rule"
            raise FlowjobError(
                f"job {job.name!r}: op {node.name!r} ({node.op}) at {node.source} {why}, but the loss "
                f"depends on it through {[i for i in node.inputs if i in needs_grad]}")
        needs = [lbn in needs_grad for lbn in node.inputs]
        with builder.placed(node.placement):  # legacy placed a backward op with its forward op
            in_grads = list(opdef.grad(GradContext(builder, node, out_grads, needs, data_rows)))
        if len(in_grads) != len(node.inputs):
            raise FlowjobError(f"gradient rule of op {node.op!r} returned {len(in_grads)} gradients "
                               f"for {len(node.inputs)} inputs")
        for lbn, grad in zip(node.inputs, in_grads):
            if grad is None or lbn not in needs_grad:
                continue
            want = job.specs[lbn]
            if grad.shape != want.shape:
                name = builder.local_name(f"{node.name}_grad_unbroadcast")
                attrs: dict[str, Any] = {"shape": want.shape}
                if data_rows and lbn not in data_rows:
                    # its target's shape is traced, not the data's: rows the data decide, if they reach this
                    # node, are summed into it (flowjob_core.plan.extent lets such a node follow them)
                    attrs["static_target"] = True
                with builder.placed(node.placement):
                    grad = builder.add_op("unbroadcast", [grad], attrs, scoped_name=name)[0]
            pending.setdefault(lbn, []).append(grad)
    for lbn in list(pending):
        total(lbn)
    return grads
