"""The backward pass of eager tensors: splice the segments a result came from into one job and sweep it.

The job holds an ``input`` node per tensor the sweep starts from or stops at (leaves, detached tensors,
given output gradients) and a copy of each segment's nodes with their values (nothing runs again); the
autodiff pass's sweep (``flowjob_core.passes.autodiff.propagate``) then adds the gradient nodes through a
``TapeBuilder``, which runs each as it is added. Tensors here are any objects with ``_value``, ``_segment``,
``_lbn`` and ``requires_grad`` (``flowjob_core.imperative.tensor.Tensor``).
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core.errors import FlowjobError
from flowjob_core.imperative.tape import Segment, TapeBuilder
from flowjob_core.ir.job import Node
from flowjob_core.passes.autodiff import propagate, reachable_backward, reachable_forward
from flowjob_core.runtime.session import Session
from flowjob_core.trace.blob import Blob

_FREED = ("trying to run a backward pass through a graph a second time (its saved values were freed by the "
          "first); pass retain_graph=True to the first backward() or autograd.grad() call")


def _segments(outputs: Sequence[Any]) -> list[Segment]:
    """The segments the outputs depend on through tensors that require a gradient, inputs before users."""
    order: list[Segment] = []
    seen: set[int] = set()
    stack: list[tuple[Segment, bool]] = [(t._segment, False) for t in reversed(outputs) if t._segment is not None]
    while stack:
        segment, expanded = stack.pop()
        if expanded:
            order.append(segment)
            continue
        if id(segment) in seen:
            continue
        seen.add(id(segment))
        stack.append((segment, True))
        for tensor in segment.inputs.values():
            if tensor._segment is not None and id(tensor._segment) not in seen:
                stack.append((tensor._segment, False))
    return order


def gradients(session: Session, outputs: Sequence[Any], seeds: Sequence[Any | None], wanted: Sequence[Any],
              retain_graph: bool) -> list[Any | None]:
    """The gradient of the outputs (weighted by ``seeds``, arrays; None for a one-element output's ones) with
    respect to each ``wanted`` tensor, as backend arrays (None where no gradient reaches it)."""
    segments = _segments(outputs)
    if any(s.freed for s in segments):
        raise FlowjobError(_FREED)
    builder = TapeBuilder(session, "backward", "train")
    job = builder.job
    lbn_of: dict[int, str] = {}
    made: dict[int, list[Any]] = {}  # segment -> the tensors it made that the sweep names
    for tensor in [*outputs, *wanted, *(t for s in segments for t in s.inputs.values())]:
        if tensor._segment is not None:
            made.setdefault(id(tensor._segment), []).append(tensor)

    def lbn(tensor: Any) -> str:
        known = lbn_of.get(id(tensor))
        if known is None:  # a leaf, or a tensor whose segment was not kept: it enters as a value
            known = lbn_of[id(tensor)] = builder.feed(tensor._value, tensor, "tensor").lbn
        return known

    for index, segment in enumerate(segments):
        prefix = f"op{index}."
        renamed = {fed: lbn(tensor) for fed, tensor in segment.inputs.items()}
        for node in segment.job.nodes:
            if node.op == "input":
                continue
            outputs_here = tuple(prefix + out for out in node.outputs)
            renamed.update(zip(node.outputs, outputs_here))
            job.nodes.append(Node(node.op, prefix + node.name, tuple(renamed[i] for i in node.inputs), outputs_here,
                                  node.attrs, node.device, node.source))
            for out, new in zip(node.outputs, outputs_here):
                job.specs[new] = segment.job.specs[out]
                builder.values[new] = segment.values[out]
        lbn_of.update({id(t): renamed[t._lbn] for t in made.get(id(segment), ())})
    output_lbns = [lbn(t) for t in outputs]
    wanted_lbns = [lbn(t) for t in wanted]
    forward: list[Node] = list(job.nodes)
    needs_grad = reachable_forward(job, set(wanted_lbns)) & reachable_backward(job, set(output_lbns))
    pending: dict[str, list[Blob]] = {}
    for out, tensor, seed in zip(output_lbns, outputs, seeds):
        if seed is None:
            blob = builder.add_op("ones_like", [builder.blob(out)], scoped_name=builder.local_name("grad_seed"))[0]
        else:
            blob = builder.feed(seed, tensor, "out_grad")
        pending.setdefault(out, []).append(blob)
    totals = propagate(builder, forward, pending, needs_grad, session.registries.ops)
    if not retain_graph:
        for segment in segments:
            segment.free()
    return [builder.values[totals[w].lbn] if w in totals else None for w in wanted_lbns]



def sources(outputs: Sequence[Any]) -> list[Any]:
    """The tensors a backward pass from ``outputs`` gives a ``.grad``: the leaves that require a gradient and
    the results that called ``retain_grad()``, each once, the outputs' own among them."""
    found: list[Any] = []
    seen: set[int] = set()
    candidates = [*outputs, *(t for s in _segments(outputs) for t in s.inputs.values())]
    for tensor in candidates:
        if id(tensor) in seen or not tensor.requires_grad:
            continue
        seen.add(id(tensor))
        if tensor._segment is None or tensor._retains_grad:
            found.append(tensor)
    return found
