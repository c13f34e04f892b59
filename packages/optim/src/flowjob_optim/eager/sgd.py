"""``flow.optim.SGD``: stochastic gradient descent, with momentum when ``momentum`` > 0 (legacy v0.4's rule).

Without momentum ``param -= lr * scale * grad``; with it ``v = momentum * v + lr * scale * grad`` and
``param -= v`` (legacy's ``momentum_update``: the slot holds ``-v``, under the name ``momentum_buf``).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from flowjob_optim.eager.optimizer import Optimizer, Rule, check_number
from flowjob_optim.update_ops import MOMENTUM_UPDATE, SGD_UPDATE


class SGD(Optimizer):
    """``SGD(parameters, lr=1e-3, momentum=0.0, scale=1.0)``: ``parameters`` an iterable of parameters or of
    parameter group dicts; ``scale`` multiplies the gradient (the loss's scale factor)."""

    def __init__(self, parameters: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 scale: float = 1.0) -> None:
        super().__init__()
        self._default_options = {"lr": lr, "momentum": momentum, "scale": scale}
        self._add_groups(parameters)

    def _check(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        owner = self._owner + where
        for name in ("lr", "momentum", "scale"):
            options[name] = check_number(owner, name, options[name])
        return options

    def _rule(self, options: Mapping[str, Any]) -> Rule:
        attrs = {"weight_decay": 0.0, "grad_scale": options["scale"]}
        if options["momentum"] == 0.0:
            return SGD_UPDATE.name, attrs, ()
        return MOMENTUM_UPDATE.name, {**attrs, "beta": options["momentum"]}, ("momentum_buf",)


__all__ = ["SGD"]
