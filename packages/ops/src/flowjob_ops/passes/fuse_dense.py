"""The dense / elementwise fusion pass ("fuse-dense"): fewer buffers and passes for MLP-style graphs.

It runs after dead-code elimination, after ``fuse-conv`` and after the optimizer package's
``optim-fusion`` (when installed), on the completed job. Two rewrites, in this order:

* ``matmul -> bias_add (-> relu)`` (what ``flow.layers.dense`` builds) becomes one
  ``matmul_bias`` node (attribute ``activation``: None or "relu"): the GEMM writes the output
  buffer, the bias add and the ReLU update it in place. It never takes a matmul that
  ``optim-fusion`` wants: that one is read by an optimizer update, this one by a bias add.
* A run of elementwise ops (any op whose record declares an ``Elementwise`` descriptor: relu, tanh, exp,
  the scalar_* ops, add/subtract/multiply/divide/maximum/minimum, ...), each the only reader of
  the one before, becomes one ``elementwise_chain`` node evaluated in one buffer, provided every
  step's result has the previous result's shape and dtype (a binary step's other operand
  broadcasts into the running value). A scalar_mul read by an in-place update (the 1/N gradient
  scale ``optim-fusion`` folds into the update) never ends a chain.

Results are bitwise those of the unfused nodes: the fused kernels make the same ufunc calls in the
same order. A value a fusion would swallow (the raw product, the pre-activation, a chain
intermediate) stays observable: if it is returned, fetched or watched (a side output), a loss, or
read by any other node, that fusion is not made. Fused nodes keep the lbn of the chain's last
output (consumers, returns and watchers see the same names): ``matmul_bias`` takes the matmul's
node name, a chain its last member's. Only ops whose kernel on the pass's backend is the op's own
one are fused (a backend that overrides a kernel keeps its own); a backend's kernel for
``elementwise_chain`` itself (the gpu backend's generated CUDA) runs the same steps, and chains are
made for it. ``FLOWJOB_FUSION=0`` turns this pass off too (``flowjob_ops.passes.fuse_conv.enabled``).
"""
from __future__ import annotations

from typing import Any

from flowjob_core.ir.analysis import observed_values, value_readers
from flowjob_core.ir.job import Job, Node
from flowjob_core.plan import numerics

from flowjob_ops.records.fused import ELEMENTWISE_CHAIN, MATMUL_ATTRS, MATMUL_BIAS, RUNNING, registry_lookup
from flowjob_ops.passes.fuse_conv import bias_act_tail, enabled, rewrite


def _registered(ctx: Any, op: str) -> bool:
    """Whether the session registers ``op`` (a bare call, without registries and backend, assumes so)."""
    registries = getattr(ctx, "registries", None)
    return registries is None or getattr(ctx, "backend", None) is None or op in registries.ops


def _own_kernels(ctx: Any, *ops: str) -> bool:
    """Whether each op runs its own kernel on the pass's backend (no backend-specific override)."""
    registries = getattr(ctx, "registries", None)
    backend = getattr(ctx, "backend", None)
    if registries is None or backend is None:
        return True
    for op in ops:
        if not _registered(ctx, op):
            return False
        opdef = registries.ops[op]
        if registries.kernels.lookup(opdef, backend.tag) is not opdef.kernel:
            return False
    return True


def _overridden_alike(ctx: Any, *ops: str) -> bool:
    """Whether the ops all run their own kernels on the pass's backend, or all run the backend's overrides: the
    cpu backend runs both matmul and matmul_bias with their products over the host threads, so fusing keeps
    that; a backend overriding only one of them would lose its kernel to the fusion."""
    registries = getattr(ctx, "registries", None)
    backend = getattr(ctx, "backend", None)
    if registries is None or backend is None:
        return True
    if not all(_registered(ctx, op) for op in ops):
        return False
    own = {registries.kernels.lookup(registries.ops[op], backend.tag) is registries.ops[op].kernel for op in ops}
    return len(own) == 1


def fuse_dense(job: Job, ctx: Any = None) -> int:
    """matmul -> bias_add (-> relu) => matmul_bias. Returns the number of fusions."""
    if not (_own_kernels(ctx, "bias_add") and _overridden_alike(ctx, "matmul", MATMUL_BIAS.name)):
        return 0
    relu_ok = _own_kernels(ctx, "relu")
    observed = observed_values(job)
    users = value_readers(job)
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    for node in job.nodes:
        if node.op != "matmul" or set(node.attrs) - set(MATMUL_ATTRS):
            continue  # an attribute the fused kernel does not know: leave the node alone
        tail = bias_act_tail(job, users, observed, node, node.outputs[0], relu=relu_ok)
        if tail is None:
            continue
        members, out, activation, swallowed = tail
        dropped |= swallowed
        add = members[0]
        attrs = {k: bool(node.attrs.get(k, False)) for k in MATMUL_ATTRS}
        attrs |= {"data_format": add.attrs.get("data_format"), "activation": activation}
        fused = Node(MATMUL_BIAS.name, node.name, (node.inputs[0], node.inputs[1], add.inputs[1]), (out,), attrs,
                     node.device, node.source, placement=node.placement)
        groups.append(([node] + members, fused))
    rewrite(job, groups, dropped)
    return len(groups)


def fuse_elementwise_chains(job: Job, ctx: Any = None) -> int:
    """Runs of single-reader elementwise ops => elementwise_chain. Returns the number of fusions."""
    if not _registered(ctx, ELEMENTWISE_CHAIN.name):  # a backend's own chain kernel is welcome: same steps
        return 0
    registries = getattr(ctx, "registries", None)
    observed = observed_values(job)
    users = value_readers(job)
    step = registry_lookup(getattr(registries, "ops", None))  # a plugin's op with a descriptor fuses too
    candidates = {id(n) for n in job.nodes
                  if step(n.op) is not None and len(n.outputs) == 1 and _own_kernels(ctx, n.op)}

    def writes_in_place(node: Node) -> bool:  # without the registries (a bare call) nothing is known to
        return registries is not None and node.op in registries.ops and bool(registries.ops[node.op].effects.mutates)

    # member -> the next member of its chain. A binary node can be the single reader of both of its
    # operands; linking both would put it in two chains (two fused nodes in its place, one reading a
    # value the other swallowed). Each node takes one predecessor, the first in job order; the other
    # operand's chain ends before it and its result becomes an input of this chain.
    nxt: dict[int, Node] = {}
    claimed: set[int] = set()
    for node in job.nodes:
        if id(node) not in candidates:
            continue
        (v,) = node.outputs
        readers = users.get(v, [])
        if v in observed or len(readers) != 1:  # a node reading v twice is listed twice
            continue
        succ = readers[0]
        if id(succ) not in candidates or id(succ) in claimed or succ.device != node.device:
            continue
        if job.specs[succ.outputs[0]] != job.specs[v]:
            continue
        if succ.op == "scalar_mul" and any(writes_in_place(r) for r in users.get(succ.outputs[0], [])):
            continue  # the gradient scale an optimizer update folds in (optim-fusion): keep it a node
        nxt[id(node)] = succ
        claimed.add(id(succ))
    followers = claimed
    heads = [n for n in job.nodes if id(n) in nxt and id(n) not in followers]
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    for head in heads:
        members = [head]
        while id(members[-1]) in nxt:
            members.append(nxt[id(members[-1])])
        inputs: list[str] = []
        steps = []
        running = None
        for member in members:
            args = []
            for lbn in member.inputs:
                if lbn == running:
                    args.append(RUNNING)
                    continue
                if lbn not in inputs:
                    inputs.append(lbn)
                args.append(inputs.index(lbn))
            steps.append((member.op, dict(member.attrs), tuple(args)))
            (running,) = member.outputs
        for member in members[:-1]:
            dropped.update(member.outputs)
        last = members[-1]
        fused = Node(ELEMENTWISE_CHAIN.name, last.name, tuple(inputs), last.outputs, {"steps": tuple(steps)},
                     last.device, head.source, placement=last.placement)
        groups.append((members, fused))
    rewrite(job, groups, dropped)
    return len(groups)


def _checks_numerics(job: Job, ctx: Any) -> bool:
    """Whether the job's plan will check every op's values (debug mode, ``enable_numerics_check``)."""
    session = getattr(ctx, "session", None)
    return session is not None and numerics.wanted(session.config, job.config)


def run(job: Job, ctx: Any = None) -> None:
    """The pass: both fusions, unless FLOWJOB_FUSION=0. Under the numerics check the elementwise ops stay
    apart, so a NaN or Inf is named on the op that made it (a chain would hide its members behind one node)."""
    if not enabled():
        return
    fuse_dense(job, ctx)
    if not _checks_numerics(job, ctx):
        fuse_elementwise_chains(job, ctx)
