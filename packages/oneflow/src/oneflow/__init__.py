"""``import oneflow as flow``: the legacy OneFlow lazy-mode API, served by flowjob.

Every name is an explicit re-export. Names of optional distributions (watch, optim, data)
are listed in ``_OPTIONAL`` and imported on first use, with a clear error when missing.
"""
from typing import Any

from flowjob_core import (
    FunctionConfig, clear_default_session, function_config, get_variable, global_function,
    sync_default_session)
from flowjob_core.dtypes import char, double, float, float16, float32, float64, int8, int32, int64, uint8

from oneflow import config, distribute, losses, scope
from oneflow._lazy import resolve

__version__ = "0.1.0"

# name -> (module, attribute or None for the module itself, distribution that provides it)
_OPTIONAL: dict[str, tuple[str, str | None, str]] = {
    "typing": ("oneflow.typing", None, "flowjob-typing"),
    "train": ("oneflow.train", None, "flowjob-core"),
    "checkpoint": ("oneflow.checkpoint", None, "flowjob-core"),
    "load_variables": ("flowjob_core.checkpoint", "load_variables", "flowjob-core"),
    "FixedTensorDef": ("flowjob_typing", 'fixed_tensor_def', "flowjob-typing"),
    "MirroredTensorDef": ("flowjob_typing", 'mirrored_tensor_def', "flowjob-typing"),
    "nn": ("oneflow.nn", None, "flowjob-ops"),
    "math": ("oneflow.math", None, "flowjob-ops"),
    "layers": ("oneflow.layers", None, "flowjob-ops"),
    "reshape": ("flowjob_ops.array_ops", 'reshape', "flowjob-ops"),
    "transpose": ("flowjob_ops.array_ops", 'transpose', "flowjob-ops"),
    "concat": ("flowjob_ops.array_ops", 'concat', "flowjob-ops"),
    "identity": ("flowjob_ops.array_ops", 'identity', "flowjob-ops"),
    "cast": ("flowjob_ops.array_ops", 'cast', "flowjob-ops"),
    "constant": ("flowjob_ops.array_ops", 'constant', "flowjob-ops"),
    "constant_like": ("flowjob_ops.array_ops", 'constant_like', "flowjob-ops"),
    "ones_like": ("flowjob_ops.array_ops", 'ones_like', "flowjob-ops"),
    "zeros_like": ("flowjob_ops.array_ops", 'zeros_like', "flowjob-ops"),
    "squeeze": ("flowjob_ops.array_ops", 'squeeze', "flowjob-ops"),
    "expand_dims": ("flowjob_ops.array_ops", 'expand_dims', "flowjob-ops"),
    "slice": ("flowjob_ops.array_ops", 'slice', "flowjob-ops"),
    "gather": ("flowjob_ops.array_ops", 'gather', "flowjob-ops"),
    "matmul": ("flowjob_ops.array_ops", 'matmul', "flowjob-ops"),
    "argmax": ("flowjob_ops.array_ops", 'argmax', "flowjob-ops"),
    "broadcast_like": ("flowjob_ops.array_ops", 'broadcast_like', "flowjob-ops"),
    "flatten": ("flowjob_ops.array_ops", 'flatten', "flowjob-ops"),
    "where": ("flowjob_ops.array_ops", 'where', "flowjob-ops"),
    "clip_by_value": ("flowjob_ops.array_ops", 'clip_by_value', "flowjob-ops"),
    "random_uniform": ("flowjob_ops.array_ops", 'random_uniform', "flowjob-ops"),
    "random_normal": ("flowjob_ops.array_ops", 'random_normal', "flowjob-ops"),
    "one_hot": ("flowjob_ops.array_ops", 'one_hot', "flowjob-ops"),
    "truncated_normal": ("flowjob_ops.initializers", 'truncated_normal', "flowjob-ops"),
    "truncated_normal_initializer": ("flowjob_ops.initializers", 'truncated_normal_initializer', "flowjob-ops"),
    "random_normal_initializer": ("flowjob_ops.initializers", 'random_normal_initializer', "flowjob-ops"),
    "random_uniform_initializer": ("flowjob_ops.initializers", 'random_uniform_initializer', "flowjob-ops"),
    "constant_initializer": ("flowjob_ops.initializers", 'constant_initializer', "flowjob-ops"),
    "zeros_initializer": ("flowjob_ops.initializers", 'zeros_initializer', "flowjob-ops"),
    "ones_initializer": ("flowjob_ops.initializers", 'ones_initializer', "flowjob-ops"),
    "xavier_uniform_initializer": ("flowjob_ops.initializers", 'xavier_uniform_initializer', "flowjob-ops"),
    "xavier_normal_initializer": ("flowjob_ops.initializers", 'xavier_normal_initializer', "flowjob-ops"),
    "glorot_uniform_initializer": ("flowjob_ops.initializers", 'glorot_uniform_initializer', "flowjob-ops"),
    "glorot_normal_initializer": ("flowjob_ops.initializers", 'glorot_normal_initializer', "flowjob-ops"),
    "kaiming_initializer": ("flowjob_ops.initializers", 'kaiming_initializer', "flowjob-ops"),
    "variance_scaling_initializer": ("flowjob_ops.initializers", 'variance_scaling_initializer', "flowjob-ops"),
    "watch": ("flowjob_watch", 'watch', "flowjob-watch"),
    "watch_diff": ("flowjob_watch", 'watch_diff', "flowjob-watch"),
    "watch_scope": ("flowjob_watch", 'watch_scope', "flowjob-watch"),
    "optimizer": ("oneflow.optimizer", None, "flowjob-optim"),
    "regularizers": ("oneflow.regularizers", None, "flowjob-optim"),
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
    "distribute",
    "sync_default_session", "uint8", *_OPTIONAL,
]
