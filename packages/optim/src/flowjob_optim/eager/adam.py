"""``flow.optim.Adam`` (legacy v0.4's rule): ``g = scale * grad + weight_decay * param`` (an L2 penalty),
``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g * g``,
``param -= lr * m / (sqrt(v) + eps)``; no bias correction, as v0.4's eager Adam had none.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from flowjob_optim.eager.optimizer import Optimizer, Rule, check_number
from flowjob_optim.update_ops import ADAM_UPDATE


def check_adam_options(owner: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options of Adam (and AdamW), checked: ``lr``, ``eps``, ``weight_decay`` >= 0, ``scale`` > 0,
    ``betas`` two numbers in [0, 1), ``amsgrad`` False (legacy v0.4 had no AMSGrad)."""
    for name in ("lr", "eps", "weight_decay"):
        options[name] = check_number(owner, name, options[name])
    options["scale"] = check_number(owner, "scale", options["scale"], low_open=True)
    betas = options["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{owner}: betas must be a pair of numbers (beta1, beta2), got {betas!r}")
    options["betas"] = tuple(check_number(owner, f"betas[{i}]", b, 0.0, 1.0) for i, b in enumerate(betas))
    if options["amsgrad"] is not False:
        raise ValueError(f"{owner}: amsgrad={options['amsgrad']!r} is not supported (legacy v0.4 had no AMSGrad); "
                         f"pass amsgrad=False")
    return options


class Adam(Optimizer):
    """``Adam(parameters, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, scale=1.0)``."""

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
        attrs = {"beta1": beta1, "beta2": beta2, "epsilon": options["eps"], "weight_decay": 0.0,
                 "l2": options["weight_decay"], "grad_scale": options["scale"]}
        return ADAM_UPDATE.name, attrs, ("exp_avg", "exp_avg_sq")


__all__ = ["Adam"]
