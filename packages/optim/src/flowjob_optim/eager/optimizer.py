"""The base of ``flow.optim``'s optimizers: parameter groups, ``step``, ``zero_grad`` and the optimizer's state.

Legacy v0.4's layout, which its schedulers and programs read: ``optimizer._param_groups`` holds ``ParamGroup``s
(``.parameters``, ``.options``: ``lr`` and the rule's hyper-parameters), ``optimizer._state[param]`` the
parameter's slots (tensors: ``momentum_buf``, ``exp_avg``, ...) and ``optimizer._state["step"]`` the steps taken.
A subclass says which update op a group's options make (``_rule``); the update's kernel is built once per
parameter and those options, and each ``step`` runs it with the group's current ``lr``.
"""
from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Mapping

import numpy as np

from flowjob_core.imperative.parameter import Parameter
from flowjob_core.imperative.tensor import Tensor
from flowjob_core.imperative.tensor_update import TensorUpdate
from flowjob_core.runtime.session import get_default_session

Rule = tuple[str, dict[str, Any], tuple[str, ...]]
"""What a group's options make: the update op, its attributes and the names of the slots it takes (in order)."""


def check_number(owner: str, name: str, value: Any, low: float = 0.0, high: float | None = None,
                 low_open: bool = False) -> float:
    """``value`` as a float in ``[low, high)`` (``(low, high)`` with ``low_open``); else a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(float(value)):
        raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")
    value = float(value)
    if (value <= low if low_open else value < low) or (high is not None and value >= high):
        bounds = f"{'>' if low_open else '>='} {low:g}" + ("" if high is None else f" and < {high:g}")
        raise ValueError(f"{owner}: {name} must be {bounds}, got {value!r}")
    return value


class ParamGroup:
    """Parameters trained with the same options: the optimizer's defaults, updated by a group dict's own."""

    def __init__(self, parameters: Any, default_options: Mapping[str, Any],
                 owner: str = "flow.optim optimizer") -> None:
        """``parameters``: an iterable of parameters, or a dict with ``params`` (one) and options."""
        options = dict(default_options)
        if isinstance(parameters, Mapping):
            if "params" not in parameters:
                raise ValueError(f"{owner}: a parameter group must be a dict with the key 'params', got keys "
                                 f"{sorted(parameters)}")
            unknown = sorted(set(parameters) - set(options) - {"params", "initial_lr"})
            if unknown:
                raise ValueError(f"{owner}: parameter group option(s) {unknown} unknown; the options are "
                                 f"{sorted(options)}")
            options.update((k, v) for k, v in parameters.items() if k != "params")
            parameters = parameters["params"]
        if isinstance(parameters, Tensor):
            parameters = [parameters]
        listed: list[Parameter] = list(parameters)
        for i, param in enumerate(listed):
            if not isinstance(param, Parameter):
                raise TypeError(f"{owner}: parameters must be flow.nn.Parameter, item {i} is "
                                f"{type(param).__name__}")
        self._parameters = listed
        self._options = options

    @property
    def options(self) -> dict[str, Any]:
        return self._options

    @property
    def parameters(self) -> list[Parameter]:
        return self._parameters


class Optimizer:
    """A subclass sets ``_default_options`` and calls ``_add_groups``; it defines ``_check`` (the options, checked
    and normalized) and ``_rule``."""

    def __init__(self) -> None:
        self._param_groups: list[ParamGroup] = []
        self._default_options: dict[str, Any] = {}
        self._state: dict[Any, Any] = {"step": 0}
        self._updates: dict[int, tuple[Any, TensorUpdate]] = {}  # id(param) -> (rule key, its update)

    @property
    def _owner(self) -> str:
        return f"flow.optim.{type(self).__name__}"

    # what a subclass says -------------------------------------------------------------------------------------
    def _check(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        return options

    def _rule(self, options: Mapping[str, Any]) -> Rule:
        raise NotImplementedError(f"{self._owner} defines no update rule")

    # parameter groups ---------------------------------------------------------------------------------------
    def _add_groups(self, parameters: Any) -> None:
        """``parameters``: an iterable of parameters (one group) or of group dicts (``{"params": [...], ...}``)."""
        self._default_options = self._check(dict(self._default_options), "")
        if isinstance(parameters, (Tensor, Mapping)):
            parameters = [parameters]
        try:
            items = list(parameters)
        except TypeError:
            raise TypeError(f"{self._owner}: parameters must be an iterable of flow.nn.Parameter or of parameter "
                            f"group dicts, got {type(parameters).__name__}") from None
        if not items:
            raise ValueError(f"{self._owner}: parameters is empty (got an empty list of parameters)")
        groups = items if all(isinstance(item, Mapping) for item in items) else [items]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: Any) -> None:
        """Train more parameters: a dict ``{"params": [...], option: value, ...}`` (the optimizer's defaults for
        the options it leaves out), or an iterable of parameters."""
        group = ParamGroup(param_group, self._default_options, self._owner)
        where = f" (parameter group {len(self._param_groups)})"
        group._options = self._check(group.options, where)
        if not group.parameters:
            raise ValueError(f"{self._owner}: parameter group {len(self._param_groups)} has no parameters")
        known = {id(p) for g in self._param_groups for p in g.parameters}
        for param in group.parameters:
            if id(param) in known:
                raise ValueError(f"{self._owner}: a parameter appears in more than one parameter group")
            known.add(id(param))
        self._param_groups.append(group)
        for param in group.parameters:
            self._state[param] = {}
            self._make_slots(param, group.options)

    def _make_slots(self, param: Parameter, options: Mapping[str, Any]) -> None:
        state = self._state[param]
        for slot in self._rule(options)[2]:
            if slot not in state:
                state[slot] = _zeros_like(param)

    # training ----------------------------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient with its group's options; returns what ``closure`` (which
        computes the loss again, with its gradients) returned, or None."""
        loss = closure() if closure is not None else None
        for i, group in enumerate(self._param_groups):
            lr = check_number(self._owner, f"lr of parameter group {i}", group.options["lr"])
            for param in group.parameters:
                if param.grad is not None:
                    self._update(param, group.options, lr, i)
        self._state["step"] = self._state["step"] + 1
        return loss

    def _update(self, param: Parameter, options: Mapping[str, Any], lr: float, group_idx: int) -> None:
        op_type, attrs, slots = self._rule(options)
        self._make_slots(param, options)
        state = self._state[param]
        key = (op_type, tuple(sorted(attrs.items())), param.shape, param.dtype)
        cached = self._updates.get(id(param))
        operands = (param, *(state[s] for s in slots), param.grad, lr)
        if cached is None or cached[0] != key:
            index = group_idx if len(self._param_groups) > 1 else None
            what = f"{self._owner}, {'' if index is None else f'group {index}, '}parameter of shape {param.shape}"
            cached = (key, TensorUpdate(op_type, operands, attrs, what))
            self._updates[id(param)] = cached
        cached[1](*operands)

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero every parameter's gradient (``set_to_none``: drop it); warns, as legacy did, when none has one."""
        all_none = True
        for group in self._param_groups:
            for param in group.parameters:
                if param.grad is not None:
                    all_none = False
                    if set_to_none:
                        param.grad = None
                    else:  # the same gradient tensor, now zeros (as legacy's zeros_(), without a job per call)
                        param.grad.copy_(_zeros_like(param.grad))
        if all_none:
            warnings.warn(f"{self._owner}.zero_grad: the parameters have no gradient; check that loss.backward() "
                          f"is called, or create the optimizer after calling module.to()", stacklevel=2)

    # state -----------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {slot: array}}, "param_groups": [{option: value, "params": [index, ...]}],
        "step": steps}``, parameters numbered in group order (copies: later steps do not change it)."""
        state: dict[int, dict[str, np.ndarray]] = {}
        groups = []
        index = 0
        for group in self._param_groups:
            indices = []
            for param in group.parameters:
                slots = self._state.get(param, {})
                state[index] = {name: value.numpy() for name, value in slots.items()}
                indices.append(index)
                index += 1
            groups.append({**group.options, "params": indices})
        return {"state": state, "param_groups": groups, "step": self._state["step"]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Options, slots and the step count from ``state_dict`` (one made by ``state_dict`` of an optimizer of
        the same groups and parameter shapes)."""
        owner = f"{self._owner}.load_state_dict"
        groups = state_dict.get("param_groups") if isinstance(state_dict, Mapping) else None
        if not isinstance(groups, list) or not isinstance(state_dict.get("state"), Mapping):
            raise ValueError(f"{owner}: state_dict must be a dict with 'state' and 'param_groups', as state_dict() "
                             f"makes")
        if len(groups) != len(self._param_groups):
            raise ValueError(f"{owner}: the state_dict has {len(groups)} parameter group(s), this optimizer "
                             f"{len(self._param_groups)}")
        for i, (saved, group) in enumerate(zip(groups, self._param_groups)):
            if len(saved.get("params", ())) != len(group.parameters):
                raise ValueError(f"{owner}: parameter group {i} holds {len(group.parameters)} parameter(s), the "
                                 f"state_dict's {len(saved.get('params', ()))}")
        for saved, group in zip(groups, self._param_groups):
            options = {k: v for k, v in saved.items() if k != "params"}
            group._options = self._check({**group.options, **options}, f" (loading {owner})")
            for param, index in zip(group.parameters, saved["params"]):
                slots = state_dict["state"].get(index, {})
                self._state[param] = {}
                for name, value in slots.items():
                    if tuple(np.shape(value)) != param.shape:
                        raise ValueError(f"{owner}: slot {name!r} of parameter {index} has shape "
                                         f"{tuple(np.shape(value))}, the parameter {param.shape}")
                    self._state[param][name] = _zeros_like(param).copy_(np.asarray(value))
                self._make_slots(param, group.options)
        self._state["step"] = int(state_dict.get("step", self._state["step"]))


def _zeros_like(tensor: Tensor) -> Tensor:
    """Zeros of the tensor's shape and dtype on the session's backend, a leaf needing no gradient (a slot)."""
    return Tensor._make(get_default_session().backend.xp.zeros(tensor.shape, tensor.dtype))


__all__ = ["Optimizer", "ParamGroup", "check_number"]
