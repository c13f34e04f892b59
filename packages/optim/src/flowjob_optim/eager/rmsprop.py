"""``flow.optim.RMSprop`` (legacy v0.4's rule): ``g = scale * grad``, ``r = alpha * r + (1 - alpha) * g * g``;
centered, also ``m = alpha * m + (1 - alpha) * g`` and ``param -= lr * g / sqrt(r - m * m + eps)``, else
``param -= lr * g / sqrt(r + eps)``.

v0.4's update kernel took ``weight_decay`` and left it unused, and its own test pins that: a nonzero
``weight_decay`` warns and changes nothing here either. ``momentum`` must be 0, as in v0.4.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Mapping

from flowjob_optim.eager.optimizer import Optimizer, Rule, check_number
from flowjob_optim.update_ops import RMSPROP_CENTERED_UPDATE, RMSPROP_UPDATE


class RMSprop(Optimizer):
    """``RMSprop(parameters, lr=1e-3, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0.0, centered=False,
    scale=1.0)``."""

    def __init__(self, parameters: Iterable[Any], lr: float = 1e-3, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0.0, centered: bool = False, scale: float = 1.0) -> None:
        super().__init__()
        self._default_options = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                 "momentum": momentum, "centered": centered, "scale": scale}
        self._add_groups(parameters)

    def _check(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        owner = self._owner + where
        for name in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            options[name] = check_number(owner, name, options[name])
        options["scale"] = check_number(owner, "scale", options["scale"], low_open=True)
        if options["momentum"] != 0.0:
            raise ValueError(f"{owner}: momentum must be 0 (legacy v0.4's RMSprop had no momentum), got "
                             f"{options['momentum']!r}")
        if not isinstance(options["centered"], bool):
            raise TypeError(f"{owner}: centered must be a bool, got {options['centered']!r}")
        if options["weight_decay"] and where:  # once per group, not again for the defaults
            warnings.warn(f"{owner}: weight_decay={options['weight_decay']!r} does not change the update (legacy "
                          f"v0.4's RMSprop left it unused)", stacklevel=4)
        return options

    def _rule(self, options: Mapping[str, Any]) -> Rule:
        attrs = {"decay_rate": options["alpha"], "epsilon": options["eps"], "weight_decay": 0.0,
                 "grad_scale": options["scale"]}
        if options["centered"]:
            return RMSPROP_CENTERED_UPDATE.name, attrs, ("square_avg", "grad_avg")
        return RMSPROP_UPDATE.name, attrs, ("square_avg",)


__all__ = ["RMSprop"]
