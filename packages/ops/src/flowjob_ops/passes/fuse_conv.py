"""The fusion pass ("fuse-conv"): rewrites conv / pool chains of a planned job into fused ops.

It runs after dead-code elimination, on the job that autodiff and the optimizer pass have
completed, so forward and gradient nodes are all there. Four rewrites:

* ``conv2d -> bias_add (-> relu)`` becomes one ``conv2d_bias`` node (attribute
  ``activation``: None or "relu"): the bias and the ReLU run as the GEMM's epilogue instead
  of two more passes over the activation. The fused node takes the convolution's node name,
  so its filter-gradient node (attribute ``forward``) still finds and reuses its im2col matrix.
* ``max_pool2d_grad -> relu_grad`` on the same input becomes one ``max_pool2d_relu_grad``
  node: the ReLU mask is applied to dy at the pooled size instead of to the full-size
  gradient (exact; see flowjob_ops.records.pool).
* ``batch_norm_train -> relu`` becomes one ``batch_norm_train`` node with ``activation="relu"``
  (the ReLU applied in its last pass), and the gradient's ``relu_grad -> batch_norm_train_grad``
  one ``batch_norm_train_grad`` with ``activation="relu"`` that masks dy block by block.
* ``conv2d_bias -> max_pool2d``, when the pooling is the activation's only reader (inference),
  becomes one ``conv2d_bias_pool`` node: it pools the GEMM result in its own layout and adds
  the bias and applies the ReLU at the pooled size (exact: both commute with max).

A value a fusion would swallow (the raw convolution, the biased pre-activation, the pooling
gradient) stays observable: if it is returned, fetched or watched (a side output), or read by
any other node, that fusion is not made (``flowjob_core.ir.analysis.observed_values`` and
``value_readers``). Fused nodes keep the lbns of the chain's last output, so consumers, returns
and watchers see the same names, and each node joins at most one fused group. ``FLOWJOB_FUSION=0``
(``flowjob_core.switches``, read when a job is planned) turns the pass off, which gives the
unfused reference for tests.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core import switches
from flowjob_core.ir.analysis import observed_values, value_producers, value_readers
from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import Job, Node

from flowjob_ops.records.conv import channel_axis
from flowjob_ops.records.matmul import bias_axis


def enabled() -> bool:
    """Whether the fusion passes run: the ``FLOWJOB_FUSION`` switch, read now (when a job is planned)."""
    return switches.current().fusion


def rewrite(job: Job, groups: list[tuple[list[Node], Node]], dropped_lbns: set[str]) -> None:
    """Replace each group of nodes by its fused node, placed where the group's last node was."""
    if not groups:
        return
    gone: set[int] = set()
    at: dict[int, Node] = {}
    for members, fused in groups:
        for n in members:
            if id(n) in gone:  # two fused nodes would replace it: one of them would read a swallowed value
                raise FlowjobError(f"job {job.name!r}: fusion bug: node {n.name!r} ({n.op}) is in two fused groups "
                                   f"(the second makes {fused.name!r} ({fused.op}))")
            gone.add(id(n))
        at[id(members[-1])] = fused
    nodes: list[Node] = []
    for node in job.nodes:
        if id(node) in at:
            nodes.append(at[id(node)])
        elif id(node) not in gone:
            nodes.append(node)
    job.nodes = nodes
    for lbn in dropped_lbns:
        job.specs.pop(lbn, None)


def bias_act_tail(job: Job, users: dict[str, list[Node]], observed: set[str], node: Node, value: str, *,
                  relu: bool = True, axis_ok: Callable[[Node], bool] = lambda add: True
                  ) -> tuple[list[Node], str, str | None, set[str]] | None:
    """The bias_add (-> relu) after ``value``, ``node``'s output, when a fusion may swallow them.

    Returns (the bias_add and relu nodes, the chain's last output, the activation or None, the
    values the fusion swallows), or None when ``value`` is observed, has another reader, or is
    not followed by a bias_add of its dtype on its device that ``axis_ok`` accepts. The relu joins
    (with ``relu``) only if it is the pre-activation's only reader and that is not observed.
    """
    readers = users.get(value, [])
    if value in observed or len(readers) != 1:
        return None
    add = readers[0]
    if add.op != "bias_add" or add.inputs[0] != value or add.device != node.device or not axis_ok(add):
        return None
    if job.specs[add.inputs[1]].dtype != job.specs[value].dtype:
        return None
    members, swallowed, activation = [add], {value}, None
    (out,) = add.outputs
    z_users = users.get(out, [])
    if relu and out not in observed and len(z_users) == 1:
        act = z_users[0]
        if act.op == "relu" and act.inputs == (out,) and act.device == node.device:
            members.append(act)
            swallowed.add(out)
            (out,) = act.outputs
            activation = "relu"
    return members, out, activation, swallowed


def fuse_conv_bias_act(job: Job) -> int:
    """conv2d -> bias_add (-> relu) => conv2d_bias. Returns the number of fusions."""
    observed = observed_values(job)
    users = value_readers(job)
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    for node in job.nodes:
        if node.op != "conv2d":
            continue
        fmt = node.attrs.get("data_format", "NCHW")

        def same_axis(add: Node, fmt: str = fmt) -> bool:
            try:
                return bias_axis(add.attrs.get("data_format"), 4) == channel_axis(fmt)
            except Exception:  # an attribute the ops would refuse anyway: leave the nodes alone
                return False

        tail = bias_act_tail(job, users, observed, node, node.outputs[0], axis_ok=same_axis)
        if tail is None:
            continue
        members, out, activation, swallowed = tail
        dropped |= swallowed
        fused = Node("conv2d_bias", node.name, (node.inputs[0], node.inputs[1], members[0].inputs[1]), (out,),
                     dict(node.attrs) | {"activation": activation}, node.device, node.source,
                     placement=node.placement)
        groups.append(([node] + members, fused))
    rewrite(job, groups, dropped)
    return len(groups)


def fuse_conv_pool(job: Job) -> int:
    """conv2d_bias -> max_pool2d => conv2d_bias_pool, when the pool is the activation's only reader.

    In a train job the pooling gradient reads the activation too, so this fires for predict
    jobs (and any job that never differentiates through the block).
    """
    observed = observed_values(job)
    users = value_readers(job)
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    for node in job.nodes:
        if node.op != "conv2d_bias":
            continue
        (a,) = node.outputs
        a_users = users.get(a, [])
        if a in observed or len(a_users) != 1:
            continue
        pool = a_users[0]
        if pool.op != "max_pool2d" or pool.inputs != (a,) or pool.device != node.device:
            continue
        fmt = node.attrs.get("data_format", "NCHW")
        try:
            if channel_axis(pool.attrs.get("data_format", "NCHW")) != channel_axis(fmt):
                continue
        except Exception:
            continue
        attrs = dict(node.attrs) | {"pool_ksize": pool.attrs["ksize"], "pool_strides": pool.attrs["strides"],
                                    "pool_padding": pool.attrs.get("padding", "VALID")}
        fused = Node("conv2d_bias_pool", node.name, node.inputs, pool.outputs, attrs, node.device, node.source,
                     placement=node.placement)
        groups.append(([node, pool], fused))
        dropped.add(a)
    rewrite(job, groups, dropped)
    return len(groups)


def fuse_pool_relu_grad(job: Job) -> int:
    """max_pool2d_grad(x, y, dy) -> relu_grad(x, .) => max_pool2d_relu_grad(x, y, dy)."""
    observed = observed_values(job)
    users = value_readers(job)
    producer = value_producers(job)
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    for node in job.nodes:
        if node.op != "relu_grad":
            continue
        y, dx = node.inputs
        pool = producer.get(dx)
        if pool is None or pool.op != "max_pool2d_grad" or pool.device != node.device:
            continue
        if dx in observed or len(users.get(dx, [])) != 1 or pool.inputs[0] != y:
            continue
        fused = Node("max_pool2d_relu_grad", pool.name, pool.inputs, node.outputs, dict(pool.attrs), node.device,
                     pool.source, placement=pool.placement)
        groups.append(([pool, node], fused))
        dropped.add(dx)
    rewrite(job, groups, dropped)
    return len(groups)


def fuse_batch_norm_relu(job: Job) -> int:
    """batch_norm_train -> relu => batch_norm_train(activation="relu"), and its gradient
    relu_grad -> batch_norm_train_grad => batch_norm_train_grad(activation="relu") reading the
    ReLU's output and the gradient reaching it. Returns the number of forward fusions."""
    observed = observed_values(job)
    users = value_readers(job)
    groups: list[tuple[list[Node], Node]] = []
    dropped: set[str] = set()
    fused_forward: dict[str, str] = {}  # the ReLU's output -> the fused forward node's name
    for node in job.nodes:
        if node.op != "batch_norm_train" or node.attrs.get("activation") is not None:
            continue
        y = node.outputs[0]
        readers = users.get(y, [])
        if y in observed or len(readers) != 1:
            continue
        act = readers[0]
        if act.op != "relu" or act.inputs != (y,) or act.device != node.device:
            continue
        fused = Node(node.op, node.name, node.inputs, (act.outputs[0],) + node.outputs[1:],
                     dict(node.attrs) | {"activation": "relu"}, node.device, node.source, placement=node.placement)
        groups.append(([act, node], fused))  # placed where the batch norm was: its statistics' readers follow it
        dropped.add(y)
        fused_forward[act.outputs[0]] = node.name
    producer = value_producers(job)
    for node in job.nodes:
        if node.op != "batch_norm_train_grad" or node.attrs.get("activation") is not None:
            continue
        dz = node.inputs[-1]
        mask = producer.get(dz)
        if mask is None or mask.op != "relu_grad" or mask.device != node.device:
            continue
        r, dr = mask.inputs
        if fused_forward.get(r) != node.attrs.get("forward") or dz in observed or len(users.get(dz, [])) != 1:
            continue
        fused = Node(node.op, node.name, node.inputs[:-1] + (r, dr), node.outputs,
                     dict(node.attrs) | {"activation": "relu"}, node.device, node.source, placement=node.placement)
        groups.append(([mask, node], fused))
        dropped.add(dz)
    rewrite(job, groups, dropped)
    return len(fused_forward)


def run(job: Job, ctx: Any = None) -> None:
    """The pass: every fusion, unless FLOWJOB_FUSION=0."""
    if not enabled():
        return
    fuse_pool_relu_grad(job)
    fuse_batch_norm_relu(job)
    fuse_conv_bias_act(job)
    fuse_conv_pool(job)
