"""Loss scaling (legacy ``flow.optimizer.loss_scale``): what keeps small float16 gradients from flushing to zero.

The loss is multiplied by the scale before autodiff (the ``loss-scale`` pass, in the differentiate phase
before ``autodiff``), so every gradient of the backward pass is computed scaled; the optimizer pass divides
each variable's gradient by the scale again before clipping and the update. The job still returns the
unscaled loss.

- ``static_loss_scale(loss_scale_factor)`` (or an optimizer's ``loss_scale_factor=``): a constant.
- ``dynamic_loss_scale(initial_loss_scale=2**30, increment_period=2000, multiplier=2.0)``: the scale lives in
  ``System-Train-DynamicLossScale-<job>-LossScale`` (float32 (1,)) beside the good-step counter
  ``System-Train-DynamicLossScale-<job>-GoodStepCounter`` (int64 (1,)); both are session variables, so
  checkpoints keep them. Each step counts the non-finite elements of the unscaled gradients: with any,
  the clipping, every update and the train step increment are skipped (legacy's ``assign_if_not``),
  the counter resets and the scale shrinks to ``max(scale / multiplier, 1)``; otherwise after
  ``increment_period`` good steps in a row the scale grows by ``multiplier``.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, ConfigError, Effects, Job, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir.bindings import Bindings
from flowjob_core.trace.builder import JobBuilder

from flowjob_optim.accumulation import COUNTER_SPEC
from flowjob_optim.update_ops import MOMENTUM_UPDATE, SGD_UPDATE

logger = logging.getLogger("flowjob.loss_scale")  # legacy logged each change of the scale at INFO

SCALE_SPEC = BlobSpec((1,), np.float32)
PREFIX = "System-Train-DynamicLossScale-"


class LossScalePolicy:
    """Base of the loss-scale policies an optimizer's ``loss_scale_policy`` takes."""


class static_loss_scale(LossScalePolicy):  # noqa: N801 - legacy's name
    """A constant loss scale."""

    def __init__(self, loss_scale_factor: float) -> None:
        if isinstance(loss_scale_factor, bool) or not isinstance(loss_scale_factor, (int, float)) \
                or not math.isfinite(loss_scale_factor) or loss_scale_factor <= 0:
            raise ValueError(f"static_loss_scale: loss_scale_factor must be a positive finite number, "
                             f"got {loss_scale_factor!r}")
        self.loss_scale_factor = float(loss_scale_factor)

    def __repr__(self) -> str:
        return f"static_loss_scale({self.loss_scale_factor})"


class dynamic_loss_scale(LossScalePolicy):  # noqa: N801 - legacy's name
    """A loss scale that shrinks on non-finite gradients (that step's update skipped) and grows after
    ``increment_period`` good steps."""

    def __init__(self, initial_loss_scale: float = 2.0 ** 30, increment_period: int = 2000,
                 multiplier: float = 2.0) -> None:
        if isinstance(initial_loss_scale, bool) or not isinstance(initial_loss_scale, (int, float)) \
                or not math.isfinite(initial_loss_scale) or initial_loss_scale <= 0:
            raise ValueError(f"dynamic_loss_scale: initial_loss_scale must be a positive finite number, "
                             f"got {initial_loss_scale!r}")
        if isinstance(increment_period, bool) or not isinstance(increment_period, int) or increment_period < 1:
            raise ValueError(f"dynamic_loss_scale: increment_period must be an int >= 1, got {increment_period!r}")
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not multiplier > 1:
            raise ValueError(f"dynamic_loss_scale: multiplier must be a number > 1, got {multiplier!r}")
        self.initial_loss_scale = float(initial_loss_scale)
        self.increment_period = increment_period
        self.multiplier = float(multiplier)

    def __repr__(self) -> str:
        return (f"dynamic_loss_scale(initial_loss_scale={self.initial_loss_scale}, "
                f"increment_period={self.increment_period}, multiplier={self.multiplier})")


def scale_name(job_name: str) -> str:
    return f"{PREFIX}{job_name}-LossScale"


def good_steps_name(job_name: str) -> str:
    return f"{PREFIX}{job_name}-GoodStepCounter"


def policy_of(optimizer: Any, job_name: str) -> LossScalePolicy | None:
    """The optimizer's loss-scale policy (``loss_scale_factor`` is a static one), or None."""
    policy = getattr(optimizer, "loss_scale_policy", None)
    factor = getattr(optimizer, "loss_scale_factor", None)
    if policy is not None and factor is not None:
        raise ConfigError(f"job {job_name!r}: {type(optimizer).__name__} has both loss_scale_factor and "
                          f"loss_scale_policy; give one")
    if factor is not None:
        return static_loss_scale(factor)
    if policy is not None and not isinstance(policy, LossScalePolicy):
        raise ConfigError(f"job {job_name!r}: loss_scale_policy must come from "
                          f"flow.optimizer.loss_scale.static_loss_scale(...) or dynamic_loss_scale(...), "
                          f"got {policy!r}")
    return policy


class _Constant:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: Any) -> np.ndarray:
        return np.full(shape, self.value, dtype=dtype)


# the pass before autodiff ----------------------------------------------------
def job_policy(job: Job, bindings: Bindings) -> LossScalePolicy | None:
    """The loss-scale policy of a train job: its optimizer's (the object its ``minimize`` intent names by key
    in ``bindings``), or (version 0.1) ``train.loss_scale_factor``."""
    for intent in job.intents:
        if intent.kind == "minimize":
            return policy_of(bindings[intent.payload["optimizer"]], job.name)
    train = job.config.section("train")
    factor = train.get("loss_scale_factor") if train.is_set else None
    return static_loss_scale(factor) if factor is not None else None


def run(job: Job, ctx: Any) -> None:
    """The ``loss-scale`` pass: each loss of a train job with a policy multiplied by the scale."""
    if job.type != "train" or not job.losses:
        return
    policy = job_policy(job, ctx.bindings)
    if policy is None:
        return
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    scale = None
    if isinstance(policy, dynamic_loss_scale):
        scale = builder.add_variable(scale_name(job.name), SCALE_SPEC, _Constant(policy.initial_loss_scale),
                                     trainable=False)
        builder.add_variable(good_steps_name(job.name), COUNTER_SPEC, None, trainable=False)
    scaled = []
    for loss in job.losses:
        stem = builder.local_name(f"{loss.split('/')[0]}-LossScale")
        if scale is None:
            assert isinstance(policy, static_loss_scale)
            (out,) = builder.add_op("scalar_mul", [builder.blob(loss)], {"scalar": policy.loss_scale_factor},
                                    scoped_name=stem)
        else:
            (out,) = builder.add_op("optim_loss_scale_mul", [builder.blob(loss), scale], {"divide": False},
                                    scoped_name=stem)
        scaled.append(out.lbn)
    job.losses = scaled


# the optimizer pass's part ---------------------------------------------------
def unscale(job: Job, builder: JobBuilder, policy: LossScalePolicy, targets: list[tuple[str, str]],
            source: str, devices: dict[str, str | None]) -> tuple[list[tuple[str, str]], list[Any]]:
    """Each gradient divided by the scale; for a dynamic scale also the count of non-finite elements
    (returned as the input that gates the updates) and the schedule node."""
    out = []
    if isinstance(policy, static_loss_scale):
        for name, lbn in targets:
            (g,) = builder.add_op("scalar_mul", [builder.blob(lbn)], {"scalar": 1.0 / policy.loss_scale_factor},
                                  scoped_name=builder.local_name(f"{name}-LossUnscale"), source=source,
                                  device=devices.get(name))
            out.append((name, g.lbn))
        return out, []
    assert isinstance(policy, dynamic_loss_scale)
    scale = builder.blob(job.variables[scale_name(job.name)].lbn)
    for name, lbn in targets:
        (g,) = builder.add_op("optim_loss_scale_mul", [builder.blob(lbn), scale], {"divide": True},
                              scoped_name=builder.local_name(f"{name}-LossUnscale"), source=source,
                              device=devices.get(name))
        out.append((name, g.lbn))
    (count,) = builder.add_op("optim_count_not_finite", [builder.blob(lbn) for _, lbn in out],
                              scoped_name=builder.local_name(f"{PREFIX}{job.name}-CountNotFinite"), source=source)
    good = builder.blob(job.variables[good_steps_name(job.name)].lbn)
    builder.add_op("optim_dynamic_loss_scale_schedule", [count, scale, good],
                   {"increment_period": policy.increment_period, "multiplier": policy.multiplier},
                   scoped_name=builder.local_name(f"{PREFIX}{job.name}-Schedule"), source=source)
    return out, [count]


def refuse_with(job: Job, policy: LossScalePolicy | None, accumulation_steps: int, sparse: Any) -> None:
    if not isinstance(policy, dynamic_loss_scale):
        return
    if accumulation_steps > 1:
        raise ConfigError(f"job {job.name!r}: dynamic_loss_scale does not combine with "
                          f"num_gradient_accumulation_steps ({accumulation_steps}) here; use static_loss_scale")
    if sparse:
        raise ConfigError(f"job {job.name!r}: dynamic_loss_scale does not combine with the indexed-slices updates "
                          f"of {sorted(sparse)}; use static_loss_scale")


# float16 variables: the rules whose arithmetic float16 keeps ----------------
FLOAT16_RULES = (SGD_UPDATE.name, MOMENTUM_UPDATE.name)


def check_float16(job: Job, name: str, spec: BlobSpec, op: str, optimizer: Any) -> None:
    """SGD and momentum update float16 variables as numpy computes them; the rules dividing by
    ``sqrt(v) + epsilon`` (Adam, RMSProp, LAMB) or by norms (LARS) would lose epsilon (1e-8 is 0 in float16)
    and give NaN, and legacy had no float16 update kernels for them either: refused, naming the variable."""
    if spec.dtype == np.float16 and op not in FLOAT16_RULES:
        raise ConfigError(f"job {job.name!r}: variable {name!r} is float16; {type(optimizer).__name__} ({op}) cannot "
                          f"update float16 variables (its epsilon and second moments underflow). Keep the variable "
                          f"float32 and cast it to float16 where it is used (flow.cast), or train with SGD")


# the ops ---------------------------------------------------------------------
def _scale_mul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 2:
        raise ShapeError(f"expected 2 inputs (value, loss scale), got {len(inputs)}")
    x, s = inputs
    if x.dtype.kind != "f":
        raise ShapeError(f"only floating values are loss-scaled, got {x}")
    if s != SCALE_SPEC:
        raise ShapeError(f"the loss scale must be float32 of shape (1,), got {s}")
    return [x]


def _scale_mul_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    apply = xp.divide if ctx.attrs.get("divide") else xp.multiply

    def run(x: Any, s: Any) -> Any:
        # the float32 scale promotes the arithmetic to float32 for float16 values, then rounds once into out
        apply(x, s[0], out=out)
        return out

    return run


def _scale_mul_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("optim_loss_scale_mul", [ctx.dy, ctx.inputs[1]], {"divide": bool(ctx.attrs.get("divide"))}),
            None]


LOSS_SCALE_MUL = OpDef("optim_loss_scale_mul", _scale_mul_infer, kernel=_scale_mul_kernel, grad=_scale_mul_grad,
                       doc="value * scale[0] (divide=True: value / scale[0]); the scale is not differentiated",
                       legacy=LegacyFace(name_prefix="LossScale"))


def _count_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs or any(spec.dtype.kind != "f" for spec in inputs):
        raise ShapeError(f"expected one or more floating gradients, got {list(inputs)}")
    return [COUNTER_SPEC]


def _count_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(*grads: Any) -> Any:
        out[0] = sum(int(g.size - xp.count_nonzero(xp.isfinite(g))) for g in grads)
        return out

    return run


COUNT_NOT_FINITE = OpDef("optim_count_not_finite", _count_infer, kernel=_count_kernel, not_differentiable=True,
                         doc="the number of NaN and Inf elements in all inputs (int64 (1,))",
                         legacy=LegacyFace(name_prefix="CountNotFinite"))


def _schedule_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"expected 3 inputs (count_not_finite, loss_scale, good_step_counter), got {len(inputs)}")
    count, scale, good = inputs
    if count != COUNTER_SPEC or good != COUNTER_SPEC or scale != SCALE_SPEC:
        raise ShapeError(f"expected int64 (1,), float32 (1,), int64 (1,), got {count}, {scale}, {good}")
    if int(attrs.get("increment_period", 0)) < 1 or not float(attrs.get("multiplier", 0)) > 1:
        raise ShapeError(f"increment_period must be >= 1 and multiplier > 1, got {attrs}")
    return []


def _schedule_kernel(ctx: KernelContext) -> Any:
    period, multiplier = int(ctx.attrs["increment_period"]), float(ctx.attrs["multiplier"])

    def run(count: Any, scale: Any, good: Any) -> None:
        # one host read per step of (1,) values, as the learning-rate node reads the step
        if int(count[0]) == 0:
            steps = int(good[0]) + 1
            if steps >= period:  # legacy's test; a counter restored from a longer period still grows
                old = float(scale[0])
                scale[0] = min(old * multiplier, float(np.finfo(np.float32).max))
                steps = 0
                logger.info("no NaN or Inf in the gradients of the last %d steps: loss scale %g -> %g", period, old,
                            float(scale[0]))
            good[0] = steps
        else:
            good[0] = 0
            old = float(scale[0])
            scale[0] = max(old / multiplier, 1.0)
            logger.info("NaN or Inf in the gradients: update skipped, loss scale %g -> %g", old, float(scale[0]))

    return run


DYNAMIC_SCHEDULE = OpDef("optim_dynamic_loss_scale_schedule", _schedule_infer, kernel=_schedule_kernel,
                         not_differentiable=True,
                         doc="legacy's dynamic_loss_scale_schedule: grows the scale after increment_period good "
                             "steps, shrinks it (at least 1) on a step with non-finite gradients",
                         effects=Effects(mutates=(1, 2)),
                         legacy=LegacyFace(name_prefix="DynamicLossScaleSchedule",
                                           legacy_names=("dynamic_loss_scale_schedule",),
                                           input_names=("count_not_finite", "loss_scale", "good_step_counter"),
                                           attr_names=("increment_period", "multiplier")))

OPS = (LOSS_SCALE_MUL, COUNT_NOT_FINITE, DYNAMIC_SCHEDULE)


class _LossScaleNamespace:
    """``flow.optimizer.loss_scale``."""

    static_loss_scale = static_loss_scale
    dynamic_loss_scale = dynamic_loss_scale


loss_scale = _LossScaleNamespace()

__all__ = ["LossScalePolicy", "dynamic_loss_scale", "loss_scale", "static_loss_scale"]
