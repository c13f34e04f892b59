"""Gradient accumulation (legacy ``func_config.train.num_gradient_accumulation_steps(N)``).

Legacy v0.3/v0.4 rewrote a train job with ``N > 1`` so that the forward and backward parts ran
N times per iteration (``repeat`` ops on the variables), summed the N gradients (``acc``, the
``repeat`` op's gradient) and scaled the sum by ``1 / (N * loss elements)``
(``ScaleModelDiffByLossInstanceNum`` counts the loss's elements over its time shape); clipping,
regularization, the learning-rate schedule, the optimizer and the train step counter then ran
once per iteration. So N micro-batches update the variables exactly as one batch made of them
would (the mean over all N * B loss elements), and schedules advance once per update.

flowjob runs one micro-batch per call (legacy fed the N micro-batches from its data loaders
inside one call; it did not support placeholders there), so the state lives between calls:

- ``System-GradientAccumulation-MicroStep-<job>``: int64 (1,), the calls run so far;
- ``System-GradientAccumulation-<job>-<var>``: the partial sum of each updated variable.

Both are session variables, so a checkpoint saved after call k of a cycle holds the partial sums
and the counter and loading it resumes the cycle where it was; a checkpoint without them (legacy,
or saved by a job without accumulation) starts a fresh cycle (they load as zeros).

Per call: ``sum = raw_grad * scale`` on the first call of a cycle, ``acc + raw_grad * scale`` after
(``scale = 1 / (N * loss elements)``); ``acc = sum`` (skipped on the last call, whose sum is
consumed); on the last call of a cycle (``micro % N == N - 1``) the clipping factor, the update
ops and the train step increment run on ``sum``, otherwise they return at once. The ops that do
this take the counter as an extra last input and the ``accumulation_steps`` attribute; without
it (``N == 1``) the job and its step are exactly what they are without accumulation.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, Effects, Kernel, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir.kernel import kernel_of

MICRO_STEP_PREFIX = "System-GradientAccumulation-MicroStep-"
ACCUMULATOR_PREFIX = "System-GradientAccumulation-"
STEPS_ATTR = "accumulation_steps"
SKIP_ATTR = "skip_if_not_finite"  # a dynamic loss scale's gate (flowjob_optim.loss_scale)
COUNTER_SPEC = BlobSpec((1,), np.int64)


def micro_step_name(job_name: str) -> str:
    """The name of a train job's micro-batch counter variable."""
    return f"{MICRO_STEP_PREFIX}{job_name}"


def accumulator_name(job_name: str, var_name: str) -> str:
    """The name of the variable holding ``var_name``'s partial gradient sum for ``job_name``."""
    return f"{ACCUMULATOR_PREFIX}{job_name}-{var_name}"


def steps(attrs: dict) -> int:
    """The node's ``accumulation_steps`` (1 when absent: an ungated node without the counter input)."""
    return int(attrs.get(STEPS_ATTR, 1) or 1)


def split_counter(inputs: Sequence[BlobSpec], attrs: dict) -> tuple[Sequence[BlobSpec], BlobSpec | None]:
    """The inputs without the trailing micro-step counter of a gated node, and that counter (and without
    the non-finite count a dynamic loss scale gates with, the very last input then)."""
    if attrs.get(SKIP_ATTR):
        if not inputs or inputs[-1] != COUNTER_SPEC:
            raise ShapeError(f"a node with {SKIP_ATTR}=True takes the non-finite count (int64 of shape (1,)) as "
                             f"its last input, got {inputs[-1] if inputs else 'nothing'}")
        inputs = inputs[:-1]
    n = steps(attrs)
    if n == 1:
        return inputs, None
    if n < 1:
        raise ShapeError(f"attribute {STEPS_ATTR!r} must be a positive int, got {attrs.get(STEPS_ATTR)!r}")
    if not inputs or inputs[-1] != COUNTER_SPEC:
        got = inputs[-1] if inputs else "nothing"
        raise ShapeError(f"a node with {STEPS_ATTR}={n} takes the micro-step counter (int64 of shape (1,)) "
                         f"as its last input, got {got}")
    return inputs[:-1], inputs[-1]


def gated(run: Callable[..., Any] | Kernel, attrs: dict) -> Callable[..., Any] | Kernel:
    """``run`` itself when the node is not gated; else a kernel that drops the trailing counter
    and calls ``run`` only on the last micro-batch of a cycle (returns None otherwise). With
    ``skip_if_not_finite`` (a dynamic loss scale) it also drops the last input, the non-finite count
    of the step's gradients, and runs nothing when that is not 0. A gate decides on the host: its kernel
    says ``host_state=True``, so a recorded step never records it."""
    inner = _on_last_micro_batch(run, attrs)
    if not attrs.get(SKIP_ATTR):
        return inner
    step = kernel_of(inner)
    run_inner = step.run

    def run_if_finite(*args: Any) -> Any:
        return run_inner(*args[:-1]) if int(args[-1][0]) == 0 else None

    return Kernel(run_if_finite, host_state=True, gated=step.gated)


def _on_last_micro_batch(run: Callable[..., Any] | Kernel, attrs: dict) -> Callable[..., Any] | Kernel:
    n = steps(attrs)
    if n == 1:
        return run
    last = n - 1
    run_inner = kernel_of(run).run

    def run_on_last(*args: Any) -> Any:
        # one host read of a (1,) counter per node: the learning-rate node reads the step the same way
        if int(args[-1][0]) % n == last:
            return run_inner(*args[:-1])
        return None

    # gated: the planner's output check waits for a call that runs
    return Kernel(run_on_last, host_state=True, gated=True)


# the accumulator ops -------------------------------------------------------
def _accumulate_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"expected 3 inputs (accumulator, gradient, micro-step counter), got {len(inputs)}")
    acc, grad, counter = inputs
    if acc.dtype.kind != "f" or grad != acc:
        raise ShapeError(f"the gradient {grad} must match the floating accumulator {acc}")
    if counter != COUNTER_SPEC:
        raise ShapeError(f"the micro-step counter must be int64 of shape (1,), got {counter}")
    if steps(attrs) < 2:
        raise ShapeError(f"attribute {STEPS_ATTR!r} must be an int >= 2, got {attrs.get(STEPS_ATTR)!r}")
    return [acc]


def _accumulate_kernel(ctx: KernelContext) -> Any:
    xp, out, n = ctx.xp, ctx.out(0), steps(ctx.attrs)
    scale = float(ctx.attrs.get("scale", 1.0))
    s = ctx.inputs[0].dtype.type(scale)

    def run(acc: Any, grad: Any, counter: Any) -> Any:
        if scale != 1.0:
            xp.multiply(grad, s, out=out)
        else:
            xp.copyto(out, grad)
        if int(counter[0]) % n:  # not the first micro-batch of a cycle: add what came before
            xp.add(out, acc, out=out)
        return out

    return run


GRAD_ACCUMULATE = OpDef(
    "optim_grad_accumulate", _accumulate_infer, kernel=_accumulate_kernel, not_differentiable=True,
    doc="inputs (accumulator, gradient, micro-step counter): gradient * scale, plus the accumulator unless "
        "the counter starts a cycle of accumulation_steps calls", effects=Effects(host_state=True),
    legacy=LegacyFace(name_prefix="GradientAccumulation"))


def _store_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"expected 3 inputs (accumulator, sum, micro-step counter), got {len(inputs)}")
    acc, total, counter = inputs
    if total != acc:
        raise ShapeError(f"the sum {total} does not match the accumulator {acc}")
    if counter != COUNTER_SPEC:
        raise ShapeError(f"the micro-step counter must be int64 of shape (1,), got {counter}")
    if steps(attrs) < 2:
        raise ShapeError(f"attribute {STEPS_ATTR!r} must be an int >= 2, got {attrs.get(STEPS_ATTR)!r}")
    return []


def _store_kernel(ctx: KernelContext) -> Any:
    xp, last = ctx.xp, steps(ctx.attrs) - 1
    n = last + 1

    def run(acc: Any, total: Any, counter: Any) -> None:
        if int(counter[0]) % n != last:  # the last call's sum is consumed by the update: nothing to keep
            xp.copyto(acc, total)

    return run


GRAD_ACCUMULATE_STORE = OpDef(
    "optim_grad_accumulate_store", _store_infer, kernel=_store_kernel, not_differentiable=True,
    doc="inputs (accumulator, sum, micro-step counter): keeps the sum in the accumulator for the next call, "
        "except on the last call of a cycle", effects=Effects(mutates=(0,), host_state=True),
    legacy=LegacyFace(name_prefix="GradientAccumulationStore"))

OPS = (GRAD_ACCUMULATE, GRAD_ACCUMULATE_STORE)
