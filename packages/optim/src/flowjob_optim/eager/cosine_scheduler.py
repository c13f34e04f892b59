"""``flow.optim.lr_scheduler.CosineScheduler``: ``lr = base_lr * ((1 - alpha) * 0.5 * (1 + cos(pi * step /
steps)) + alpha)`` for the first ``steps`` steps, ``base_lr * alpha`` after (legacy v0.4)."""
from __future__ import annotations

import math
import numbers

from flowjob_optim.eager.lr_scheduler import LrScheduler
from flowjob_optim.eager.optimizer import Optimizer, check_number


class CosineScheduler(LrScheduler):
    """``CosineScheduler(optimizer, steps, alpha=0.0, last_step=-1, verbose=False)``."""

    steps: int
    alpha: float

    def __init__(self, optimizer: Optimizer, steps: int, alpha: float = 0.0, last_step: int = -1,
                 verbose: bool = False) -> None:
        owner = "flow.optim.lr_scheduler.CosineScheduler"
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps <= 0:
            raise ValueError(f"{owner}: steps must be an int > 0, got {steps!r}")
        self.steps = int(steps)
        self.alpha = check_number(owner, "alpha", alpha)
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self) -> list[float]:
        if self.last_step < self.steps:
            cos_decay = 0.5 * (1 + math.cos(math.pi * self.last_step / self.steps))
            factor = (1 - self.alpha) * cos_decay + self.alpha
            return [base_lr * factor for base_lr in self.base_lrs]
        return [base_lr * self.alpha for base_lr in self.base_lrs]


__all__ = ["CosineScheduler"]
