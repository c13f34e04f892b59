"""The optimizer pass (after ``autodiff``, before ``dce``): turn a train job's gradients into updates.

For a train job it adds, in this order:

1. the train step counter ``System-Train-TrainStep-<job>`` (int64, shape (1,), starts at 0),
   a session variable (so checkpoints save it), not trainable;
2. one learning-rate node per schedule: its attribute ``schedule`` names the schedule by its key in
   the global function's bindings, its kernel evaluates it for the counter's value (the step being run);
3. the clipping factor, when the optimizer clips;
4. per updated variable, its slot variables (``<var>-momentum``, ``<var>-m``, ...: session
   variables, not trainable) and one fused update op writing the variable and slots in place
   from the 1/N-scaled gradient ``ctx.variable_grads[var]`` (autodiff's);
5. the counter increment.

With ``func_config.train.num_gradient_accumulation_steps(N)``, ``N > 1``, the gradients first go
through the accumulators of :mod:`flowjob_optim.accumulation` and the clipping factor, the updates
and the counter increment run on every N-th call only.

Variables listed in ``function_config.indexed_slices_optimizer_conf`` get the row-wise update of
:mod:`flowjob_optim.sparse_updates` in place of step 4's dense one.

The planner runs in-place writers after every other reader of what they write, so a
returned or watched variable is its value from before the update.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, FlowjobError, Job
from flowjob_core.ir.bindings import Bindings
from flowjob_core.ir.naming import train_step_name
from flowjob_core.trace.blob import Blob
from flowjob_core.trace.builder import JobBuilder

from flowjob_optim import accumulation, loss_scale, sparse_updates
from flowjob_optim.model_update_conf import optimizer_from_train_config
from flowjob_optim.optimizers import Optimizer
from flowjob_optim.schedules import CustomScheduler
from flowjob_optim.update_ops import LR_DTYPE, STEP_DTYPE

@dataclass(frozen=True)
class Constant:
    """Initializer of slot variables: every element ``value``."""

    value: float

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: Any) -> np.ndarray:
        return np.full(shape, self.value, dtype=dtype)


def job_optimizer(job: Job, bindings: Bindings) -> tuple[Optimizer, str]:
    """The job's optimizer (the object its ``minimize`` intents name by key in ``bindings``) and the
    source line that chose it; a clear error when there is none."""
    intents = [i for i in job.intents if i.kind == "minimize"]
    chosen = list(dict.fromkeys(i.payload["optimizer"] for i in intents))  # one object, one key
    if len(chosen) > 1:
        sources = ", ".join(i.source for i in intents)
        raise FlowjobError(f"job {job.name!r}: minimize was called with {len(chosen)} different optimizers "
                           f"(at {sources}); a job trains with one optimizer")
    if chosen:
        return bindings[chosen[0]], intents[0].source
    train = job.config.section("train")
    if train.is_set:
        return optimizer_from_train_config(train, job.name), f"function_config of {job.name!r}"
    raise FlowjobError(
        f"train job {job.name!r} has a loss but no optimizer: call "
        f"flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss) "
        f"in its body, or (version 0.1) set train.primary_lr(...) and train.model_update_conf(...) on its "
        f"function_config")


def _regularization(job: Job, name: str, ctx: Any, optimizer: Optimizer) -> tuple[float, float]:
    key, session = job.variables[name].regularizer, ctx.session
    reg = ctx.bindings[key] if key is not None else None
    if reg is None and name in session.variables:
        reg = getattr(session.variables[name], "regularizer", None)
    l1 = float(getattr(reg, "l1", 0.0) or 0.0)
    l2 = float(getattr(reg, "l2", 0.0) or 0.0)
    return l1, l2 + optimizer.l2_for(name)


def _existing(builder: JobBuilder, lbn: str, spec: BlobSpec, what: str) -> Blob:
    job = builder.job
    if lbn not in job.specs:
        raise FlowjobError(f"job {job.name!r}: {what} {lbn!r} is not a blob of this job")
    if job.specs[lbn].shape != spec.shape or job.specs[lbn].dtype.kind != spec.dtype.kind:
        raise FlowjobError(f"job {job.name!r}: {what} {lbn!r} is {job.specs[lbn]}, expected {spec}")
    return builder.blob(lbn)


def accumulation_steps(job: Job) -> int:
    """``func_config.train.num_gradient_accumulation_steps`` of the job (1 when not set)."""
    return int(job.config.section("train").get("num_gradient_accumulation_steps", 1))


def _raw_gradient(job: Job, ctx: Any, name: str, grad_lbn: str) -> tuple[str, float]:
    """The variable's unscaled gradient and the factor autodiff's ``scalar_mul`` applied to it (1/loss
    elements), so an accumulator scales once by ``1 / (N * loss elements)`` as legacy did."""
    raw = ctx.grads.get(job.variables[name].lbn)
    for node in job.nodes:
        if grad_lbn in node.outputs:
            if node.op == "scalar_mul" and node.inputs == (raw,):
                return raw, float(node.attrs["scalar"])
            break
    return grad_lbn, 1.0


def run(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    if job.type != "train":
        return
    optimizer, source = job_optimizer(job, ctx.bindings)
    n_acc = accumulation_steps(job)
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    devices = {n.name: n.device for n in job.nodes if n.op == "variable"}

    def add(op: str, inputs: list[Blob], attrs: dict[str, Any] | None, stem: str,
            device: str | None = None) -> tuple[Blob, ...]:
        return builder.add_op(op, inputs, attrs, scoped_name=builder.local_name(stem), source=source, device=device)

    step_spec = BlobSpec((1,), STEP_DTYPE)
    if optimizer.train_step_lbn is not None:
        step, counter = _existing(builder, optimizer.train_step_lbn, step_spec, "train_step_lbn"), None
    else:
        name = train_step_name(job.name)
        known = job.variables.get(name)  # declared by a pass before this one that reads the step
        counter = builder.blob(known.lbn) if known is not None else builder.add_variable(name, step_spec, None,
                                                                                           trainable=False)
        step = counter

    targets = [(name, lbn) for name, lbn in ctx.variable_grads.items() if optimizer.updates(name)]
    sparse = sparse_updates.listed_gradients(job, ctx, optimizer, n_acc)
    # loss scaling: gradients divided by the scale again; a dynamic scale gates the updates (skip)
    policy = loss_scale.job_policy(job, ctx.bindings)
    loss_scale.refuse_with(job, policy, n_acc, sparse)
    skip: dict[str, Any] = {}
    skip_in: list[Blob] = []
    if policy is not None and targets:
        targets, skip_in = loss_scale.unscale(job, builder, policy, targets, source, devices)
        skip = {accumulation.SKIP_ATTR: True} if skip_in else {}
        if isinstance(policy, loss_scale.static_loss_scale):
            sparse = {n: (i, v, sc / policy.loss_scale_factor) for n, (i, v, sc) in sparse.items()}
    # gradient accumulation: the nodes that run once per update get the gate (attribute and counter input)
    gate: dict[str, Any] = {}
    gate_in: list[Blob] = []
    if n_acc > 1 and targets:
        micro = builder.add_variable(accumulation.micro_step_name(job.name), accumulation.COUNTER_SPEC, None,
                                     trainable=False)
        gate, gate_in = {accumulation.STEPS_ATTR: n_acc}, [micro]
        summed = []
        for name, grad_lbn in targets:
            raw, scale = _raw_gradient(job, ctx, name, grad_lbn)
            acc = builder.add_variable(accumulation.accumulator_name(job.name, name), job.variables[name].spec,
                                       None, trainable=False)
            (total,) = add("optim_grad_accumulate", [acc, builder.blob(raw), micro],
                           {**gate, "scale": scale / n_acc}, f"System-GradientAccumulation-{name}", devices.get(name))
            add("optim_grad_accumulate_store", [acc, total, micro], gate,
                f"System-GradientAccumulation-{name}_store", devices.get(name))
            summed.append((name, total.lbn))
        targets = summed
        add("optim_train_step_increment", [micro], None, f"{accumulation.micro_step_name(job.name)}_increment")
    clip = None
    if optimizer.grad_clipping is not None and targets:
        (clip,) = add("optim_clip_by_global_norm", [builder.blob(lbn) for _, lbn in targets] + gate_in + skip_in,
                      {"clip_norm": optimizer.grad_clipping.clip_norm, **gate, **skip}, "System-Train-ClipByGlobalNorm")

    rates: dict[str, Blob] = {}  # schedule key -> its learning rate
    for name, grad_lbn in targets:
        schedule = optimizer.schedule_for(name)
        key = ctx.bindings.add(schedule)
        lr = rates.get(key)
        if lr is None:
            if isinstance(schedule, CustomScheduler):
                lr = _existing(builder, schedule.lbn, BlobSpec((1,), LR_DTYPE), "CustomScheduler's learning rate")
            else:
                (lr,) = add("optim_learning_rate", [step], {"schedule": key}, "System-Train-LearningRate")
            rates[key] = lr
        vdef = job.variables[name]
        rule = optimizer.rule(name)
        loss_scale.check_float16(job, name, vdef.spec, rule.op, optimizer)
        slots = []
        for suffix, initial, shape in rule.slots:
            spec = vdef.spec if shape == "like" else BlobSpec((1,), vdef.spec.dtype)
            slots.append(builder.add_variable(f"{name}-{suffix}", spec, Constant(initial), trainable=False))
        l1, l2 = _regularization(job, name, ctx, optimizer)
        attrs = dict(rule.attrs, l1=l1, l2=l2, clipped=clip is not None, **gate, **skip)
        op = sparse_updates.check_update(job, name, optimizer, rule.op, attrs, clip is not None) \
            if name in sparse else None
        if op is not None:
            indices, values, scale = sparse[name]
            add(op, [builder.blob(vdef.lbn), *slots, builder.blob(indices), builder.blob(values), lr],
                dict(rule.attrs, scale=scale), f"{name}_optimizer", devices.get(name))
            continue
        inputs = [builder.blob(vdef.lbn), *slots, builder.blob(grad_lbn), lr] + ([clip] if clip is not None else [])
        inputs += gate_in + skip_in
        add(rule.op, inputs, attrs, f"{name}_optimizer", devices.get(name))

    if counter is not None:
        add("optim_train_step_increment", [counter, *gate_in, *skip_in], {**gate, **skip} or None,
            f"{train_step_name(job.name)}_increment")
