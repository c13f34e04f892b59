"""``flow.optim.AdamW`` (legacy v0.4's rule): Adam with decoupled weight decay, ``g = scale * grad``,
``m``, ``v`` as Adam, ``param -= lr * (m / (sqrt(v) + eps) + weight_decay * param)``; no bias correction.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from flowjob_optim.eager.adam import check_adam_options
from flowjob_optim.eager.optimizer import Optimizer, Rule


class AdamW(Optimizer):
    """``AdamW(parameters, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, scale=1.0)``."""

    def __init__(self, parameters: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, scale: float = 1.0) -> None:
        super().__init__()
        self._default_options = {"lr": lr, "eps": eps, "betas": betas, "weight_decay": weight_decay,
                                 "amsgrad": amsgrad, "scale": scale}
        self._add_groups(parameters)

    def _check(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        return check_adam_options(self._owner + where, options)

    def _rule(self, options: Mapping[str, Any]) -> Rule:
        beta1, beta2 = options["betas"]
        attrs = {"beta1": beta1, "beta2": beta2, "epsilon": options["eps"], "weight_decay": options["weight_decay"],
                 "grad_scale": options["scale"]}
        return "optim_adam_update", attrs, ("exp_avg", "exp_avg_sq")


__all__ = ["AdamW"]
