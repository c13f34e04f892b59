"""The base of ``flow.optim.lr_scheduler``'s schedulers (legacy v0.4's ``LrScheduler``).

A scheduler sets each parameter group's ``lr`` from ``get_lr()`` at every ``step()``, the first time when it is
made (so ``last_step`` counts the steps taken, starting at 0). ``base_lrs`` are the groups' ``initial_lr``,
recorded when ``last_step`` is -1 and required in the groups' options when resuming.
"""
from __future__ import annotations

import numbers
from typing import Any

from flowjob_optim.eager.optimizer import Optimizer


class LrScheduler:
    """``LrScheduler(optimizer, last_step=-1, verbose=False)``; a subclass defines ``get_lr()``."""

    _optimizer: Optimizer
    base_lrs: list[float]
    last_lr: list[float]
    last_step: int
    verbose: bool

    def __init__(self, optimizer: Optimizer, last_step: int = -1, verbose: bool = False) -> None:
        owner = f"flow.optim.lr_scheduler.{type(self).__name__}"
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{owner}: optimizer must be a flow.optim optimizer, got {type(optimizer).__name__}")
        if isinstance(last_step, bool) or not isinstance(last_step, numbers.Integral) or last_step < -1:
            raise ValueError(f"{owner}: last_step must be an int >= -1, got {last_step!r}")
        self._optimizer = optimizer
        if last_step == -1:
            for group in optimizer._param_groups:
                group.options["initial_lr"] = group.options["lr"]
        else:
            for i, group in enumerate(optimizer._param_groups):
                if "initial_lr" not in group.options:
                    raise ValueError(f"{owner}: resuming at last_step={last_step} needs 'initial_lr' in the options "
                                     f"of parameter group {i}")
        self.base_lrs = [group.options["initial_lr"] for group in optimizer._param_groups]
        self.last_lr = []
        self.last_step = int(last_step)
        self.verbose = bool(verbose)
        self.step()

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "_optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_lr(self) -> list[float]:
        """The learning rate of each parameter group at ``last_step``."""
        raise NotImplementedError(f"{type(self).__name__} defines no get_lr()")

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` set."""
        return self.last_lr

    def print_lr(self, group_idx: int, lr: float) -> None:
        # legacy's verbose output on stdout, asked for by the caller (verbose=True)
        print(f"Adjusting learning rate of param_groups[{group_idx}] to {lr}")

    def step(self) -> None:
        self.last_step += 1
        self.last_lr = self.get_lr()
        for i, group in enumerate(self._optimizer._param_groups):
            group.options["lr"] = self.last_lr[i]
            if self.verbose:
                self.print_lr(i, self.last_lr[i])


__all__ = ["LrScheduler"]
