"""``flow.optim.lr_scheduler.LambdaLR``: ``lr = base_lr * lr_lambda(step)``, one function for every parameter
group or one per group (legacy v0.4)."""
from __future__ import annotations

import types
from typing import Any, Callable, Sequence

from flowjob_optim.eager.lr_scheduler import LrScheduler
from flowjob_optim.eager.optimizer import Optimizer


class LambdaLR(LrScheduler):
    """``LambdaLR(optimizer, lr_lambda, last_step=-1, verbose=False)``."""

    lr_lambdas: list[Callable[[int], float]]

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_step: int = -1, verbose: bool = False) -> None:
        owner = "flow.optim.lr_scheduler.LambdaLR"
        groups = len(getattr(optimizer, "_param_groups", ()))
        lambdas: list[Any] = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * groups
        if len(lambdas) != groups:
            raise ValueError(f"{owner}: lr_lambda holds {len(lambdas)} function(s), the optimizer has {groups} "
                             f"parameter group(s)")
        for i, fn in enumerate(lambdas):
            if not callable(fn):
                where = f"lr_lambda[{i}]" if isinstance(lr_lambda, (list, tuple)) else "lr_lambda"
                raise TypeError(f"{owner}: {where} must be callable, got {type(fn).__name__}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_step, verbose)

    def state_dict(self) -> dict[str, Any]:
        """As the base's, with each callable object's attributes in ``lr_lambdas`` (None for a plain function or
        lambda, which cannot be saved)."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("_optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [])
        self.__dict__.update(state)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)

    def get_lr(self) -> list[float]:
        return [base_lr * fn(self.last_step) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]


__all__ = ["LambdaLR"]
