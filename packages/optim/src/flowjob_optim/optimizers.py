"""``flow.optimizer.SGD``, ``Adam``, ... : what to do with each variable's gradient.

An optimizer is a description. ``minimize(loss)`` (inside a train job's body; a predict job becomes
one, with a warning, as in legacy) marks the loss and records a ``minimize`` intent naming the
optimizer by its key in the global function's bindings (the job is plain data); the optimizer
pass later asks the optimizer, per
trainable variable, for an :class:`UpdateRule` (the fused update op, its slot variables
and attributes) and builds the nodes. Formulas are in ``update_ops``; ``g`` there is the
1/N-scaled gradient (the mean over the loss elements), clipped and regularized.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flowjob_core import FlowjobError, add_loss, maybe_builder

from flowjob_optim.clipping import ClipGradient
from flowjob_optim.hyperparameters import HyperParameters
from flowjob_optim.schedules import CustomScheduler, LrScheduler
from flowjob_optim.update_ops import (ADAM_BC_UPDATE, ADAM_UPDATE, LAMB_UPDATE, LARS_UPDATE, MOMENTUM_UPDATE,
                                     RMSPROP_CENTERED_UPDATE, RMSPROP_UPDATE, SGD_UPDATE)


@dataclass(frozen=True)
class UpdateRule:
    """One variable's update: the op type, its slots (``<var>-<suffix>``, initial value, shape) and attributes."""

    op: str
    slots: tuple[tuple[str, float, str], ...] = ()  # (suffix, initial value, "like" | "scalar")
    attrs: dict[str, Any] = field(default_factory=dict)


def _patterns(value: str | Sequence[str] | None, what: str) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{what} must be a string or a list of strings, got {value!r}")
        re.compile(item)
    return items


def _fraction(owner: str, name: str, value: float) -> float:
    """A decay rate (beta): in [0, 1), as the moving averages need."""
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1), got {value}")
    return value


def _non_negative(owner: str, name: str, value: float) -> float:
    value = float(value)
    if not value >= 0.0:  # also rejects NaN
        raise ValueError(f"{owner}: {name} must be >= 0, got {value}")
    return value


class Optimizer(HyperParameters):
    """Shared options: schedule, clipping, weight decay (with include/exclude name patterns), train step."""

    def __init__(self, lr_scheduler: Any, loss_scale_factor: float | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, weight_decay: float | None = None,
                 weight_decay_includes: str | Sequence[str] | None = None,
                 weight_decay_excludes: str | Sequence[str] | None = None,
                 variables: Sequence[str] | None = None) -> None:
        name = type(self).__name__
        if not isinstance(lr_scheduler, (LrScheduler, CustomScheduler)):
            raise TypeError(f"{name}: lr_scheduler must be a schedule such as "
                            f"flow.optimizer.PiecewiseConstantScheduler([], [0.1]), got {lr_scheduler!r}")
        if grad_clipping is not None and not isinstance(grad_clipping, ClipGradient):
            raise TypeError(f"{name}: grad_clipping must come from flow.optimizer.grad_clipping.by_global_norm(...), "
                            f"got {grad_clipping!r}")
        if weight_decay_includes is not None and weight_decay_excludes is not None:
            raise ValueError(f"{name}: give weight_decay_includes or weight_decay_excludes, not both")
        self.lr_scheduler = lr_scheduler
        self.loss_scale_factor = loss_scale_factor  # fp32 only: scaling the seed and unscaling cancel out
        self.loss_scale_policy = loss_scale_policy
        self.grad_clipping = grad_clipping
        self.train_step_lbn = getattr(train_step_lbn, "lbn", train_step_lbn)
        self.weight_decay = _non_negative(name, "weight_decay", weight_decay) if weight_decay is not None else 0.0
        self.weight_decay_includes = _patterns(weight_decay_includes, f"{name}: weight_decay_includes")
        self.weight_decay_excludes = _patterns(weight_decay_excludes, f"{name}: weight_decay_excludes")
        self.variables = list(variables) if variables is not None else None

    # the body's call ------------------------------------------------------
    def minimize(self, loss: Any) -> None:
        """Mark ``loss`` (a blob or a list of blobs) as the job's loss and train with this optimizer."""
        builder = maybe_builder()
        what = f"{type(self).__name__}.minimize"
        if builder is None:
            raise FlowjobError(f"{what} is only valid inside a @flow.global_function body while it is traced")
        if builder.job.type == "predict":
            # legacy's minimize set the job's train conf, which replaced its predict conf: the job trained
            warnings.warn(f"job {builder.job.name!r} is declared type='predict' and calls {what}: it trains from "
                          f"now on (gradients and updates), as legacy OneFlow made such a job a train job; "
                          f"declare it @flow.global_function(type='train')", stacklevel=2)
            builder.job.type = "train"
        add_loss(list(loss) if isinstance(loss, (list, tuple)) else loss)
        builder.add_intent("minimize", optimizer=builder.bindings.add(self))

    # what the pass asks ---------------------------------------------------
    def updates(self, var_name: str) -> bool:
        """Whether this optimizer updates the variable (all of them unless ``variables`` names some)."""
        return self.variables is None or var_name in self.variables

    def schedule_for(self, var_name: str) -> Any:
        return self.lr_scheduler

    def weight_decay_for(self, var_name: str) -> float:
        if not self.weight_decay:
            return 0.0
        if self.weight_decay_includes is not None:
            return self.weight_decay if any(re.search(p, var_name) for p in self.weight_decay_includes) else 0.0
        if self.weight_decay_excludes is not None:
            return 0.0 if any(re.search(p, var_name) for p in self.weight_decay_excludes) else self.weight_decay
        return self.weight_decay

    def l2_for(self, var_name: str) -> float:
        """An L2 term the optimizer itself adds to the gradient (version-0.1 ``weight_l2``/``bias_l2``)."""
        return 0.0

    def rule(self, var_name: str) -> UpdateRule:
        raise NotImplementedError


class SGD(Optimizer):
    """``momentum == 0``: ``w -= lr * g``; else ``m = momentum * m - lr * g; w += m`` (slot ``<var>-momentum``).

    Legacy default: ``momentum=0.9``.
    """

    def __init__(self, lr_scheduler: Any, loss_scale_factor: float | None = None, momentum: float = 0.9,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         variables=variables)
        self.momentum = float(momentum)

    def rule(self, var_name: str) -> UpdateRule:
        wd = self.weight_decay_for(var_name)
        if self.momentum == 0:
            return UpdateRule(SGD_UPDATE.name, (), {"weight_decay": wd})
        return UpdateRule(MOMENTUM_UPDATE.name, (("momentum", 0.0, "like"),),
                          {"beta": self.momentum, "weight_decay": wd})


class SGDW(SGD):
    """SGD with decoupled weight decay: ``w -= lr * (g + wd * w)`` (momentum: ``w = w + m - lr * wd * w``)."""

    def __init__(self, lr_scheduler: Any, loss_scale_factor: float | None = None, momentum: float = 0.9,
                 weight_decay: float | None = None, weight_decay_includes: str | Sequence[str] | None = None,
                 weight_decay_excludes: str | Sequence[str] | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        Optimizer.__init__(self, lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                           weight_decay, weight_decay_includes, weight_decay_excludes, variables)
        self.momentum = float(momentum)


class Adam(Optimizer):
    """``m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr_t m / (sqrt(v) + eps)`` (slots ``-m``, ``-v``).

    ``do_bias_correction``: ``lr_t = lr sqrt(1 - b2_t) / (1 - b1_t)`` with per-variable slots
    ``-beta1_t``/``-beta2_t`` starting at ``b1``/``b2`` and multiplied by them after each step
    (the textbook ``1 - b^t`` correction); without it ``lr_t = lr`` (legacy default).
    """

    def __init__(self, lr_scheduler: Any, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 do_bias_correction: bool = False, loss_scale_factor: float | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         variables=variables)
        self._set_moments(beta1, beta2, epsilon, do_bias_correction)

    def _set_moments(self, beta1: float, beta2: float, epsilon: float, do_bias_correction: bool) -> None:
        owner = type(self).__name__
        self.beta1, self.beta2 = _fraction(owner, "beta1", beta1), _fraction(owner, "beta2", beta2)
        self.epsilon = _non_negative(owner, "epsilon", epsilon)
        self.do_bias_correction = bool(do_bias_correction)

    def rule(self, var_name: str) -> UpdateRule:
        attrs = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                 "weight_decay": self.weight_decay_for(var_name)}
        slots: tuple[tuple[str, float, str], ...] = (("m", 0.0, "like"), ("v", 0.0, "like"))
        if not self.do_bias_correction:
            return UpdateRule(ADAM_UPDATE.name, slots, attrs)
        slots += (("beta1_t", self.beta1, "scalar"), ("beta2_t", self.beta2, "scalar"))
        return UpdateRule(ADAM_BC_UPDATE.name, slots, attrs)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``w -= lr_t (m / (sqrt(v) + eps) + wd * w)``."""

    def __init__(self, lr_scheduler: Any, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 do_bias_correction: bool = False, loss_scale_factor: float | None = None,
                 weight_decay: float | None = None, weight_decay_includes: str | Sequence[str] | None = None,
                 weight_decay_excludes: str | Sequence[str] | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        Optimizer.__init__(self, lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                           weight_decay, weight_decay_includes, weight_decay_excludes, variables)
        self._set_moments(beta1, beta2, epsilon, do_bias_correction)


class LazyAdam(Adam):
    """Legacy LazyAdam: Adam with bias correction always on (``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
    slots ``-m``, ``-v``, ``-beta1_t``, ``-beta2_t``) and no switch for it.

    "Lazy" in legacy v0.3/v0.4 concerns sparse (indexed-slices) gradients of embedding lookups, where
    only the looked-up rows are updated: variables listed in ``function_config.indexed_slices_optimizer_conf``
    get that row-wise update (``flowjob_optim.sparse_updates``); any other gradient goes through the plain
    Adam update, zero elements included.
    """

    def __init__(self, lr_scheduler: Any, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 loss_scale_factor: float | None = None, grad_clipping: ClipGradient | None = None,
                 train_step_lbn: str | None = None, loss_scale_policy: Any = None,
                 variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, beta1, beta2, epsilon, True, loss_scale_factor, grad_clipping,
                         train_step_lbn, loss_scale_policy, variables)


class RMSProp(Optimizer):
    """``ms = d ms + (1-d) g^2``; ``w -= lr g / sqrt(ms + eps)`` (slot ``-mean_square``).

    ``centered``: also ``mg = d mg + (1-d) g`` (slot ``-mean_gradient``) and ``ms - mg^2`` in the root.
    """

    def __init__(self, lr_scheduler: Any, decay_rate: float = 0.99, epsilon: float = 1e-8, centered: bool = False,
                 loss_scale_factor: float | None = None, grad_clipping: ClipGradient | None = None,
                 train_step_lbn: str | None = None, loss_scale_policy: Any = None,
                 variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         variables=variables)
        self.decay_rate, self.epsilon, self.centered = float(decay_rate), float(epsilon), bool(centered)

    def rule(self, var_name: str) -> UpdateRule:
        attrs = {"decay_rate": self.decay_rate, "epsilon": self.epsilon,
                 "weight_decay": self.weight_decay_for(var_name)}
        if self.centered:
            return UpdateRule(RMSPROP_CENTERED_UPDATE.name,
                              (("mean_square", 0.0, "like"), ("mean_gradient", 0.0, "like")), attrs)
        return UpdateRule(RMSPROP_UPDATE.name, (("mean_square", 0.0, "like"),), attrs)


class LARS(Optimizer):
    """``trust = coeff * ||w|| / (eps + ||g|| + wd ||w||)`` (1 when either norm is 0), ``local_lr = lr * trust``;
    ``m = beta m - local_lr g``; ``w = w + m - local_lr wd w`` (slot ``-momentum``). Legacy v0.4 arguments,
    in its order."""

    def __init__(self, lr_scheduler: Any, momentum_beta: float = 0.9, epsilon: float = 1e-9,
                 lars_coefficient: float = 0.0001, loss_scale_factor: float | None = None,
                 weight_decay: float | None = None, weight_decay_includes: str | Sequence[str] | None = None,
                 weight_decay_excludes: str | Sequence[str] | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         weight_decay, weight_decay_includes, weight_decay_excludes, variables)
        self.momentum_beta = _fraction("LARS", "momentum_beta", momentum_beta)
        self.epsilon = _non_negative("LARS", "epsilon", epsilon)
        self.lars_coefficient = float(lars_coefficient)
        if not self.lars_coefficient > 0:
            raise ValueError(f"LARS: lars_coefficient must be > 0, got {self.lars_coefficient}")

    def rule(self, var_name: str) -> UpdateRule:
        return UpdateRule(LARS_UPDATE.name, (("momentum", 0.0, "like"),),
                          {"momentum_beta": self.momentum_beta, "epsilon": self.epsilon,
                           "lars_coefficient": self.lars_coefficient,
                           "weight_decay": self.weight_decay_for(var_name)})


class LAMB(Optimizer):
    """Adam moments with bias correction (slots ``-m``, ``-v``, ``-beta1_t``, ``-beta2_t``), update
    ``u = m_hat / (sqrt(v_hat) + eps)`` scaled by the trust ratio ``||w|| / ||u||``:
    ``w -= lr * ratio * (u + wd * w)``. Legacy v0.4 arguments, in its order.

    The ``beta_t`` slots start at 1, so step ``t`` divides by the textbook ``1 - b^t`` (what legacy's own
    test compared against, tensorflow-addons' LAMB); legacy's kernel started them at ``b``, one power ahead.
    """

    def __init__(self, lr_scheduler: Any, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                 loss_scale_factor: float | None = None, weight_decay: float | None = None,
                 weight_decay_includes: str | Sequence[str] | None = None,
                 weight_decay_excludes: str | Sequence[str] | None = None,
                 grad_clipping: ClipGradient | None = None, train_step_lbn: str | None = None,
                 loss_scale_policy: Any = None, variables: Sequence[str] | None = None) -> None:
        super().__init__(lr_scheduler, loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         weight_decay, weight_decay_includes, weight_decay_excludes, variables)
        self.beta1, self.beta2 = _fraction("LAMB", "beta1", beta1), _fraction("LAMB", "beta2", beta2)
        self.epsilon = _non_negative("LAMB", "epsilon", epsilon)

    def rule(self, var_name: str) -> UpdateRule:
        return UpdateRule(LAMB_UPDATE.name,
                          (("m", 0.0, "like"), ("v", 0.0, "like"), ("beta1_t", 1.0, "scalar"),
                           ("beta2_t", 1.0, "scalar")),
                          {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                           "weight_decay": self.weight_decay_for(var_name)})


__all__ = ["Adam", "AdamW", "LAMB", "LARS", "LazyAdam", "Optimizer", "RMSProp", "SGD", "SGDW", "UpdateRule"]
