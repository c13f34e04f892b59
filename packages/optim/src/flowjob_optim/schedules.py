"""Learning-rate schedules and warmups, evaluated per step from the train-step counter.

Each schedule is a plain callable ``schedule(step) -> float``; the optimizer pass adds one
node per schedule whose attribute names it by its key in the global function's bindings and
whose kernel calls it with the counter's value (the step about to run, 0 for the first call).
Formulas follow legacy ``learning_rate_schedule_kernel.cpp``: while a warmup is active
(``step < warmup.steps``) only the warmup applies, to ``base_lr``; afterwards the decay does.
The value is stored as float32, as legacy did.

Each formula has a device form too (``rate_on_device(xp, step)``: the same arithmetic in float64 as array
operations on the counter's device array, nothing read back), which a backend that records its steps (CUDA graphs)
runs instead, so the rate is computed inside the recorded step. It reads the schedule's attributes when the plan is
built (legacy compiled them into the job); a subclass that changes a formula without giving its device form keeps
the host evaluation (``has_device_form``).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from flowjob_optim.hyperparameters import HyperParameters


class Warmup:
    """Base of the warmups: active while ``step < steps``."""

    def __init__(self, steps: int, multiplier: float) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"warmup steps must be a non-negative int, got {steps!r}")
        self.steps = steps
        self.multiplier = float(multiplier)

    def active(self, step: int) -> bool:
        return step < self.steps

    def apply(self, base_lr: float, step: int) -> float:
        raise NotImplementedError

    def apply_on_device(self, xp: Any, base_lr: float, t: Any) -> Any:
        """``apply`` on a float64 device array of steps ``t``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.steps}, {self.multiplier})"


class ConstantWarmup(Warmup):
    """``lr = base_lr * multiplier`` for the first ``steps`` steps (``flow.optimizer.warmup.constant``)."""

    def apply(self, base_lr: float, step: int) -> float:
        return base_lr * self.multiplier

    def apply_on_device(self, xp: Any, base_lr: float, t: Any) -> Any:
        return xp.full_like(t, base_lr * self.multiplier)


class LinearWarmup(Warmup):
    """``lr = base_lr * (m + (1 - m) * step / steps)`` for the first ``steps`` steps, ``m = start_multiplier``
    (``flow.optimizer.warmup.linear``)."""

    def __init__(self, steps: int, start_multiplier: float) -> None:
        super().__init__(steps, start_multiplier)

    @property
    def start_multiplier(self) -> float:
        return self.multiplier

    def apply(self, base_lr: float, step: int) -> float:
        m = self.multiplier
        return base_lr * (m + (1.0 - m) * (step / self.steps))

    def apply_on_device(self, xp: Any, base_lr: float, t: Any) -> Any:
        m = self.multiplier
        return base_lr * (m + (1.0 - m) * (t / self.steps))


class LrScheduler(HyperParameters):
    """A learning rate per step: the warmup while it is active, else ``decayed(step)``."""

    def __init__(self, base_lr: float, warmup: Warmup | None = None) -> None:
        if warmup is not None and not isinstance(warmup, Warmup):
            raise TypeError(f"warmup must come from flow.optimizer.warmup.constant/linear, got {warmup!r}")
        self.base_lr = float(base_lr)
        self.warmup = warmup

    def decayed(self, step: int) -> float:
        return self.base_lr

    def __call__(self, step: int) -> float:
        if self.warmup is not None and self.warmup.active(step):
            return self.warmup.apply(self.base_lr, step)
        return self.decayed(step)

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        """``decayed`` on a float64 device array of steps ``t``."""
        return xp.full_like(t, self.base_lr)

    def has_device_form(self) -> bool:
        """Whether ``rate_on_device`` computes what ``__call__`` does: each formula in use (``__call__``, ``decayed``,
        the warmup's ``apply``) comes with its device form from the same class."""
        pairs = [(type(self), "__call__", "rate_on_device"), (type(self), "decayed", "decayed_on_device")]
        if self.warmup is not None:
            pairs.append((type(self.warmup), "apply", "apply_on_device"))
        if hasattr(self, "ratio"):
            pairs.append((type(self), "ratio", "ratio_on_device"))
        return all(_defined_by(cls, host) is _defined_by(cls, device) for cls, host, device in pairs)

    def rate_on_device(self, xp: Any, step: Any) -> Any:
        """The rate of the steps in the int64 device array ``step`` as a float64 device array: ``__call__`` as array
        operations (call only where ``has_device_form()``)."""
        t = step.astype(np.float64)
        rate = self.decayed_on_device(xp, t)
        if self.warmup is not None:
            rate = xp.where(t < self.warmup.steps, self.warmup.apply_on_device(xp, self.base_lr, t), rate)
        return rate


def _defined_by(cls: type, name: str) -> type | None:
    return next((klass for klass in cls.__mro__ if name in vars(klass)), None)


def _piece(boundaries: Sequence[int], step: int) -> int:
    """Index of the first boundary with ``step <= boundary`` (``len(boundaries)`` when none)."""
    for i, boundary in enumerate(boundaries):
        if step <= boundary:
            return i
    return len(boundaries)


def _piece_on_device(xp: Any, boundaries: Sequence[int], values: Sequence[float], t: Any) -> Any:
    """``values[_piece(boundaries, t)]`` on a device array: the last value, then each boundary's from the last."""
    rate = xp.full_like(t, values[len(boundaries)])
    for i in reversed(range(len(boundaries))):
        rate = xp.where(t <= boundaries[i], values[i], rate)
    return rate


def _positive_steps(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    return steps


class PiecewiseConstantScheduler(LrScheduler):
    """``lr = values[i]``, ``i`` the first boundary with ``step <= boundaries[i]``, else the last value."""

    def __init__(self, boundaries: Sequence[int], values: Sequence[float], warmup: Warmup | None = None) -> None:
        boundaries, values = list(boundaries), [float(v) for v in values]
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"PiecewiseConstantScheduler needs len(values) == len(boundaries) + 1, got "
                             f"{len(values)} values for {len(boundaries)} boundaries")
        super().__init__(values[0], warmup)
        self.boundaries, self.values = boundaries, values

    def decayed(self, step: int) -> float:
        return self.values[_piece(self.boundaries, step)]

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        return _piece_on_device(xp, self.boundaries, self.values, t)


class PiecewiseScalingScheduler(LrScheduler):
    """``lr = base_lr * ([1] + scale)[i]``, ``i`` as for PiecewiseConstantScheduler; a number scales every piece."""

    def __init__(self, base_lr: float, boundaries: Sequence[int], scale: float | Sequence[float],
                 warmup: Warmup | None = None) -> None:
        super().__init__(base_lr, warmup)
        self.boundaries = list(boundaries)
        scales = [float(scale)] * len(self.boundaries) if isinstance(scale, (int, float)) else [float(s) for s in scale]
        if len(scales) != len(self.boundaries):
            raise ValueError(f"PiecewiseScalingScheduler needs one scale per boundary, got {len(scales)} for "
                             f"{len(self.boundaries)} boundaries")
        self.scales = [1.0] + scales

    def decayed(self, step: int) -> float:
        return self.scales[_piece(self.boundaries, step)] * self.base_lr

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        return _piece_on_device(xp, self.boundaries, [scale * self.base_lr for scale in self.scales], t)


class CosineScheduler(LrScheduler):
    """``t = min(step, steps)``; ``lr = base_lr * ((1 - alpha) * 0.5 * (1 + cos(pi * t / steps)) + alpha)``."""

    def __init__(self, base_lr: float, steps: int, alpha: float = 0.0, warmup: Warmup | None = None) -> None:
        super().__init__(base_lr, warmup)
        self.steps, self.alpha = _positive_steps(steps), float(alpha)

    def decayed(self, step: int) -> float:
        t = min(float(step), float(self.steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * t / self.steps))
        return self.base_lr * ((1.0 - self.alpha) * cosine + self.alpha)

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        t = xp.minimum(t, float(self.steps))
        cosine = 0.5 * (1.0 + xp.cos(math.pi * t / self.steps))
        return self.base_lr * ((1.0 - self.alpha) * cosine + self.alpha)


class LinearCosineScheduler(LrScheduler):
    """``t = min(step, steps)``; ``lr = base_lr * ((alpha + (steps - t) / steps)
    * 0.5 * (1 + cos(2 pi num_periods t / steps)) + beta)``."""

    def __init__(self, base_lr: float, steps: int, num_periods: float = 0.5, alpha: float = 0.0,
                 beta: float = 0.001, warmup: Warmup | None = None) -> None:
        super().__init__(base_lr, warmup)
        self.steps = _positive_steps(steps)
        self.num_periods, self.alpha, self.beta = float(num_periods), float(alpha), float(beta)

    def decayed(self, step: int) -> float:
        t = min(float(step), float(self.steps))
        linear = (self.steps - t) / self.steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * 2.0 * self.num_periods * t / self.steps))
        return self.base_lr * ((self.alpha + linear) * cosine + self.beta)

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        t = xp.minimum(t, float(self.steps))
        linear = (self.steps - t) / self.steps
        cosine = 0.5 * (1.0 + xp.cos(math.pi * 2.0 * self.num_periods * t / self.steps))
        return self.base_lr * ((self.alpha + linear) * cosine + self.beta)


class PolynomialScheduler(LrScheduler):
    """``lr = (base_lr - end) * (1 - t / d) ** power + end``; without ``cycle`` ``t = min(step, steps)``,
    ``d = steps``; with it ``t = max(step, 1)``, ``d = steps * ceil(t / steps)``."""

    def __init__(self, base_lr: float, steps: int, end_learning_rate: float = 0.0001, power: float = 1.0,
                 cycle: bool = False, warmup: Warmup | None = None) -> None:
        super().__init__(base_lr, warmup)
        self.steps = _positive_steps(steps)
        self.end_learning_rate, self.power, self.cycle = float(end_learning_rate), float(power), bool(cycle)

    def decayed(self, step: int) -> float:
        t, d = float(step), float(self.steps)
        if self.cycle:
            t = 1.0 if step == 0 else t
            d = d * math.ceil(t / d)
        else:
            t = min(t, d)
        return (self.base_lr - self.end_learning_rate) * (1.0 - t / d) ** self.power + self.end_learning_rate

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        d: Any = float(self.steps)
        if self.cycle:
            t = xp.maximum(t, 1.0)  # steps are whole: only step 0 becomes 1
            d = d * xp.ceil(t / d)
        else:
            t = xp.minimum(t, d)
        return (self.base_lr - self.end_learning_rate) * xp.power(1.0 - t / d, self.power) + self.end_learning_rate


class PolynomialSchduler(PolynomialScheduler):
    """Legacy's misspelt export of :class:`PolynomialScheduler` (deprecated there already): the same schedule,
    with a ``DeprecationWarning``."""

    def __init__(self, base_lr: float, steps: int, end_learning_rate: float = 0.0001, power: float = 1.0,
                 cycle: bool = False, warmup: Warmup | None = None) -> None:
        warnings.warn("flow.optimizer.PolynomialSchduler is a misspelling kept from legacy OneFlow; use "
                      "flow.optimizer.PolynomialScheduler", DeprecationWarning, stacklevel=2)
        super().__init__(base_lr, steps, end_learning_rate, power, cycle, warmup)


class _RatioDecay(LrScheduler):
    """Decays driven by ``p = step / steps`` (floored with ``staircase``)."""

    def __init__(self, base_lr: float, steps: int, decay_rate: float, staircase: bool = False,
                 warmup: Warmup | None = None) -> None:
        super().__init__(base_lr, warmup)
        self.steps, self.decay_rate, self.staircase = _positive_steps(steps), float(decay_rate), bool(staircase)

    def ratio(self, step: int) -> float:
        p = float(step) / float(self.steps)
        return math.floor(p) if self.staircase else p

    def ratio_on_device(self, xp: Any, t: Any) -> Any:
        p = t / float(self.steps)
        return xp.floor(p) if self.staircase else p


class ExponentialScheduler(_RatioDecay):
    """``lr = base_lr * decay_rate ** p``."""

    def decayed(self, step: int) -> float:
        return self.base_lr * self.decay_rate ** self.ratio(step)

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        return self.base_lr * xp.power(self.decay_rate, self.ratio_on_device(xp, t))


class InverseTimeScheduler(_RatioDecay):
    """``lr = base_lr / (1 + decay_rate * p)``."""

    def decayed(self, step: int) -> float:
        return self.base_lr / (1.0 + self.decay_rate * self.ratio(step))

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        return self.base_lr / (1.0 + self.decay_rate * self.ratio_on_device(xp, t))


class NaturalExpScheduler(_RatioDecay):
    """``lr = base_lr * exp(-decay_rate * p)``."""

    def decayed(self, step: int) -> float:
        return self.base_lr * math.exp(-self.decay_rate * self.ratio(step))

    def decayed_on_device(self, xp: Any, t: Any) -> Any:
        return self.base_lr * xp.exp(-self.decay_rate * self.ratio_on_device(xp, t))


class CustomScheduler(HyperParameters):
    """The learning rate is a blob of the job (``lbn``, float32, shape (1,)), computed by the user."""

    def __init__(self, lbn: Any) -> None:
        self.lbn = getattr(lbn, "lbn", lbn)
        if not isinstance(self.lbn, str):
            raise TypeError(f"CustomScheduler needs a blob or its logical blob name, got {lbn!r}")


class _WarmupNamespace:
    """``flow.optimizer.warmup.constant(steps, multiplier)`` / ``.linear(steps, start_multiplier)``."""

    constant = ConstantWarmup
    linear = LinearWarmup


warmup = _WarmupNamespace()

__all__ = [
    "ConstantWarmup", "CosineScheduler", "CustomScheduler", "ExponentialScheduler", "InverseTimeScheduler",
    "LinearCosineScheduler", "LinearWarmup", "LrScheduler", "NaturalExpScheduler", "PiecewiseConstantScheduler",
    "PiecewiseScalingScheduler", "PolynomialSchduler", "PolynomialScheduler", "Warmup", "warmup",
]
