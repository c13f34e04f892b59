"""``flow.config`` (session settings) and ``flow.function_config`` (per-job settings)."""
from __future__ import annotations

import copy
from typing import Any, Callable, Self

from flowjob_core import dtypes
from flowjob_core.errors import ConfigError
from flowjob_core.scope import LogicalView, Placement


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Options:
    """Setters called like functions (``cfg.default_data_type(flow.float)``), each checked."""

    _kinds: dict[str, tuple[Callable[[Any], bool], str, Any]] = {}
    _what = "option"

    def __init__(self) -> None:
        object.__setattr__(self, "values", {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        kinds = type(self)._kinds
        if name not in kinds:
            raise ConfigError(f"unknown {self._what} {name!r}; known: {', '.join(sorted(kinds))}")
        check, expected, default = kinds[name]

        def setter(value: Any = default) -> None:
            if value is None or not check(value):
                raise ConfigError(f"{self._what} {name!r} expects {expected}, got {value!r}")
            self.values[name] = value

        return setter

    def __setattr__(self, name: str, value: Any) -> None:
        getattr(self, name)(value)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def __deepcopy__(self, memo: dict) -> Self:
        clone = type(self)()
        clone.values.update(copy.deepcopy(self.values, memo))
        return clone

    def __eq__(self, other: object) -> bool:
        # by value, so two copies of a job (which holds its function's config) compare equal
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable: setters change it


def _is_dtype(v: Any) -> bool:
    try:
        dtypes.as_dtype(v)
        return True
    except TypeError:
        return False


class TrainConfig(_Options):
    """``cfg.train.*`` of version 0.1 training: read by the optimizer pass."""

    _what = "train option"
    _kinds = {
        "primary_lr": (_is_number, "a number", None),
        "secondary_lr": (_is_number, "a number", None),
        "model_update_conf": (lambda v: isinstance(v, dict), "a dict such as {'naive_conf': {}}", None),
        "loss_scale_factor": (_is_number, "a number", None),
        "weight_l2": (_is_number, "a number", None),
        "bias_l2": (_is_number, "a number", None),
    }

    @property
    def is_set(self) -> bool:
        return bool(self.values)


class FunctionConfig(_Options):
    """``flow.function_config()``: settings of one global function. An unknown name is an error."""

    _what = "function_config option"
    _kinds = {
        "default_data_type": (_is_dtype, "a flowjob dtype such as flow.float", None),
        "default_placement_scope": (lambda v: isinstance(v, Placement), "flow.scope.placement(...)", None),
        "default_logical_view": (lambda v: isinstance(v, LogicalView),
                                 "flow.scope.consistent_view() or mirrored_view()", None),
        "default_distribute_strategy": (lambda v: isinstance(v, LogicalView),
                                        "flow.distribute.consistent_strategy() or mirrored_strategy()", None),
        "allow_cpu_return_op": (_is_bool, "a bool", True),
        "enable_inplace": (_is_bool, "a bool", True),
        "enable_fuse_add_to_output": (_is_bool, "a bool", True),
        "enable_fuse_model_update_ops": (_is_bool, "a bool", True),
        "enable_auto_mixed_precision": (_is_bool, "a bool", True),
        "use_xla_jit": (_is_bool, "a bool", True),
        "use_tensorrt": (_is_bool, "a bool", True),
        "enable_keep_header_only": (_is_bool, "a bool", True),
        "concurrency_width": (_is_int, "an int", None),
    }

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "train", TrainConfig())

    def __deepcopy__(self, memo: dict) -> "FunctionConfig":
        clone = super().__deepcopy__(memo)
        object.__setattr__(clone, "train", copy.deepcopy(self.train, memo))
        return clone


function_config = FunctionConfig


class SessionConfig:
    """Settings that apply to a whole session (``flow.config.*``)."""

    def __init__(self) -> None:
        self.gpu_device_num: int | None = None  # None: not asked for
        self.cpu_device_num: int = 1
        self.debug_mode = False
        self.seed = 0
        self.max_in_flight = 8
