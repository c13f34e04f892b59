"""``flow.optim.AdamW`` (legacy v0.4's rule): Adam with decoupled weight decay, ``g = scale * grad``,
``m``, ``v`` as Adam, ``param -= lr * (m / (sqrt(v) + eps) + weight_decay * param)``; no bias correction.
"""
from __future__ import annotations

from typing import Any, Mapping

from flowjob_optim.eager.adam import Adam
from flowjob_optim.eager.optimizer import Rule
from flowjob_optim.update_ops import ADAM_UPDATE


class AdamW(Adam):
    """``AdamW(parameters, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, scale=1.0)``:
    Adam's arguments and checks; only what ``weight_decay`` does differs."""

    def _rule(self, options: Mapping[str, Any]) -> Rule:
        beta1, beta2 = options["betas"]
        attrs = {"beta1": beta1, "beta2": beta2, "epsilon": options["eps"], "weight_decay": options["weight_decay"],
                 "grad_scale": options["scale"]}
        return ADAM_UPDATE.name, attrs, ("exp_avg", "exp_avg_sq")


__all__ = ["AdamW"]
