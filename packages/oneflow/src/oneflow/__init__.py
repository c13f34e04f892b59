"""``import oneflow as flow``: the legacy OneFlow lazy-mode API, served by flowjob.

Every name is an explicit re-export. Names of optional distributions (watch, optim, data)
are listed in ``_OPTIONAL`` and imported on first use, with a clear error when missing.
"""
from typing import Any

from flowjob_core import (
    FunctionConfig, clear_default_session, function_config, get_variable, global_function,
    sync_default_session)
from flowjob_core.dtypes import char, double, float, float16, float32, float64, int8, int32, int64, uint8

from oneflow import config, losses, scope
from oneflow._lazy import resolve

__version__ = "0.1.0"

# name -> (module, attribute or None for the module itself, distribution that provides it)
_OPTIONAL: dict[str, tuple[str, str | None, str]] = {
    "typing": ("oneflow.typing", None, "flowjob-typing"),
    "FixedTensorDef": ("flowjob_typing", "fixed_tensor_def", "flowjob-typing"),
    "MirroredTensorDef": ("flowjob_typing", "mirrored_tensor_def", "flowjob-typing"),
    "nn": ("oneflow.nn", None, "flowjob-ops"),
    "watch": ("flowjob_watch", "watch", "flowjob-watch"),
    "watch_diff": ("flowjob_watch", "watch_diff", "flowjob-watch"),
    "data": ("oneflow.data", None, "flowjob-data"),
}


def __getattr__(name: str) -> Any:
    value = resolve(_OPTIONAL, name, "oneflow")
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_OPTIONAL))


__all__ = [
    "FunctionConfig", "char", "clear_default_session", "config", "double", "float", "float16", "float32",
    "float64", "function_config", "get_variable", "global_function", "int32", "int64", "int8", "losses", "scope",
    "sync_default_session", "uint8", *_OPTIONAL,
]
