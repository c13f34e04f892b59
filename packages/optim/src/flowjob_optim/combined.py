"""``flow.optimizer.CombinedOptimizer``: several optimizers over disjoint sets of variables, in one minimize.

Legacy v0.4 added each member's update conf for its own variables (its ``variables=`` list, or every variable
when it names none) and refused variables claimed twice. Here the optimizer pass asks the combined optimizer,
per variable, which member updates it and takes that member's rule, schedule, weight decay and L2: each
variable is updated exactly as its member alone would update it. The combined optimizer holds what a job has
one of: the train step (``train_step_lbn``) and loss scaling (``loss_scale_factor``/``loss_scale_policy``).
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import FlowjobError

from flowjob_optim.optimizers import Optimizer, UpdateRule
from flowjob_optim.schedules import PiecewiseConstantScheduler


class CombinedOptimizer(Optimizer):
    """Members ``optimizers`` (none combined itself, none with its own train step, loss scaling or gradient
    clipping), each updating its own variables."""

    def __init__(self, optimizers: Sequence[Optimizer], loss_scale_factor: float | None = None,
                 train_step_lbn: str | None = None, loss_scale_policy: Any = None) -> None:
        # the members' schedules drive their variables; this one is never asked for a variable
        super().__init__(PiecewiseConstantScheduler([], [0.0]), loss_scale_factor, None, train_step_lbn,
                         loss_scale_policy)
        members = list(optimizers)
        if not members:
            raise ValueError("CombinedOptimizer: give it at least one optimizer")
        for member in members:
            what = f"CombinedOptimizer: member {type(member).__name__}"
            if not isinstance(member, Optimizer):
                raise TypeError(f"CombinedOptimizer: members must be flow.optimizer optimizers, got {member!r}")
            if isinstance(member, CombinedOptimizer):
                raise ValueError("CombinedOptimizer: a member may not be a CombinedOptimizer itself")
            if member.train_step_lbn is not None:
                raise ValueError(f"{what} has a train_step_lbn; a job has one train step: give it to the "
                                 f"CombinedOptimizer")
            if member.loss_scale_policy is not None or member.loss_scale_factor is not None:
                raise ValueError(f"{what} scales the loss; a job has one loss scale: give it to the CombinedOptimizer")
            if member.grad_clipping is not None:
                raise ValueError(f"{what} clips gradients; clipping by the global norm of a part of the variables is "
                                 f"not supported in a CombinedOptimizer")
        self.optimizers = members

    def member_for(self, var_name: str) -> Optimizer | None:
        """The member that updates ``var_name`` (None when none does); a variable two members claim is an error."""
        owners = [m for m in self.optimizers if m.updates(var_name)]
        if len(owners) > 1:
            names = ", ".join(type(m).__name__ for m in owners)
            raise FlowjobError(f"CombinedOptimizer: variable {var_name!r} is updated by several members ({names}); "
                               f"give each member its own variables= list")
        return owners[0] if owners else None

    def _member(self, var_name: str) -> Optimizer:
        member = self.member_for(var_name)
        if member is None:
            raise FlowjobError(f"CombinedOptimizer: no member updates variable {var_name!r}")
        return member

    def updates(self, var_name: str) -> bool:
        return self.member_for(var_name) is not None

    def schedule_for(self, var_name: str) -> Any:
        return self._member(var_name).schedule_for(var_name)

    def weight_decay_for(self, var_name: str) -> float:
        return self._member(var_name).weight_decay_for(var_name)

    def l2_for(self, var_name: str) -> float:
        return self._member(var_name).l2_for(var_name)

    def rule(self, var_name: str) -> UpdateRule:
        return self._member(var_name).rule(var_name)


__all__ = ["CombinedOptimizer"]
