"""The update-fusion pass (after ``dce``, before ``verify-final``): fewer passes over each gradient.

1. **Scale folding.** Autodiff scales each variable's raw gradient by 1/(loss elements) with a
   ``scalar_mul`` node. When an update op is that node's only reader (the scaled value is not
   returned, watched or clipped), the update reads the raw gradient and takes the factor as its
   ``grad_scale`` attribute: SGD and momentum multiply it into the learning rate (a scalar),
   other rules scale the gradient where they prepare it. The raw gradient (what ``watch_diff``
   shows) is unchanged.
2. **SGD into the gradient's matmul.** A plain SGD update (no weight decay, regularizer or
   clipping) whose gradient is a 2-d ``matmul`` nobody else reads becomes one
   ``optim_sgd_matmul_update`` where the backend runs it as one call (the cpu override of
   ``flowjob_optim.cpu``: a single BLAS ``gemm`` with ``beta = 1``, numpy's own OpenBLAS)
   adds ``-lr * scale * op(a) @ op(b)`` to the variable in place; no gradient buffer, no extra
   memory passes.

Results agree with the unfused nodes up to float32 rounding (``lr * scale`` is rounded once
instead of the gradient being rounded twice). The pass runs after ``dce`` so that every reader
of a value (returns, watches, side outputs) is final when it decides.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import Job
from flowjob_core.ir.analysis import buffer_roots, in_place_writers, observed_values, value_producers, value_readers
from flowjob_core.ir.job import Node

from flowjob_optim.update_ops import SGD_MATMUL_UPDATE, SGD_UPDATE, UPDATE_OPS, fused_sgd_available


def _sole_reader(lbn: str, node: Node, users: dict[str, list[Node]], kept: set[str]) -> bool:
    readers = users.get(lbn, ())
    return lbn not in kept and len(readers) == 1 and readers[0] is node


def run(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    if job.type != "train":
        return
    updates = [n for n in job.nodes if n.op in UPDATE_OPS]
    if not updates:
        return
    producer = value_producers(job)
    users = value_readers(job)
    kept = observed_values(job)
    ops = ctx.registries.ops
    root = buffer_roots(job.nodes, ops)  # value -> the buffer it lives in (views share their input's)
    # values some node writes in place: a fused update reading one could run after that write (the planner
    # orders only plain readers before in-place writers), so their matmuls stay separate nodes
    written = set(in_place_writers(job.nodes, ops, root))
    backend = getattr(ctx, "backend", None)
    dead: set[int] = set()
    replace: dict[int, Node] = {}
    for node in updates:
        gi = len(UPDATE_OPS[node.op].effects.mutates)  # inputs: variable, slots, gradient, lr[, clip]
        grad = node.inputs[gi]
        scaler = producer.get(grad)
        if (scaler is not None and scaler.op == "scalar_mul" and _sole_reader(grad, node, users, kept)
                and job.specs[scaler.inputs[0]] == job.specs[grad]):
            raw = scaler.inputs[0]
            node.inputs = node.inputs[:gi] + (raw,) + node.inputs[gi + 1:]
            node.attrs["grad_scale"] = float(node.attrs.get("grad_scale", 1.0)) * float(scaler.attrs["scalar"])
            users[raw] = [node if u is scaler else u for u in users.get(raw, [])]
            dead.add(id(scaler))
            grad = raw
        if node.op != SGD_UPDATE.name or node.attrs.get("clipped") or len(node.inputs) != 3:
            continue
        if any(float(node.attrs.get(k, 0.0) or 0.0) for k in ("weight_decay", "l1", "l2")):
            continue
        mm = producer.get(grad)
        var_spec = job.specs[node.inputs[0]]
        if (mm is None or mm.op != "matmul" or not _sole_reader(grad, node, users, kept)
                or not fused_sgd_available(ctx.registries, backend, var_spec.dtype)):
            continue
        if any(root.get(i, i) in written for i in mm.inputs):
            continue  # e.g. the gradient reads a variable (this one: gemm must not write what it reads)
        a, b = (job.specs[i] for i in mm.inputs)
        if len(a.shape) != 2 or len(b.shape) != 2 or a.dtype != var_spec.dtype or b.dtype != var_spec.dtype:
            continue
        attrs = {"transpose_a": bool(mm.attrs.get("transpose_a", False)),
                 "transpose_b": bool(mm.attrs.get("transpose_b", False)),
                 "grad_scale": float(node.attrs.get("grad_scale", 1.0))}
        replace[id(node)] = Node(SGD_MATMUL_UPDATE.name, node.name, (node.inputs[0], *mm.inputs, node.inputs[2]), (),
                                 attrs, node.device, node.source, placement=node.placement)
        dead.add(id(mm))
    if not dead and not replace:
        return
    nodes = []
    for node in job.nodes:
        if id(node) in dead:
            for lbn in node.outputs:
                job.specs.pop(lbn, None)
            continue
        nodes.append(replace.get(id(node), node))
    job.nodes = nodes

