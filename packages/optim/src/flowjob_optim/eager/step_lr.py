"""``flow.optim.lr_scheduler.StepLR``: every ``step_size`` steps each group's current ``lr`` is multiplied by
``gamma`` (legacy v0.4; a change made to ``lr`` from outside carries on)."""
from __future__ import annotations

import numbers

from flowjob_optim.eager.lr_scheduler import LrScheduler
from flowjob_optim.eager.optimizer import Optimizer, check_number


class StepLR(LrScheduler):
    """``StepLR(optimizer, step_size, gamma=0.1, last_step=-1, verbose=False)``."""

    step_size: int
    gamma: float

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_step: int = -1,
                 verbose: bool = False) -> None:
        owner = "flow.optim.lr_scheduler.StepLR"
        if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral) or step_size <= 0:
            raise ValueError(f"{owner}: step_size must be an int > 0, got {step_size!r}")
        self.step_size = int(step_size)
        self.gamma = check_number(owner, "gamma", gamma, low_open=True)
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self) -> list[float]:
        groups = self._optimizer._param_groups
        if self.last_step == 0 or self.last_step % self.step_size:
            return [group.options["lr"] for group in groups]
        return [group.options["lr"] * self.gamma for group in groups]


__all__ = ["StepLR"]
