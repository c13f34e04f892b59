"""``import oneflow as flow``: the legacy OneFlow lazy-mode API, served by flowjob.

Core names are explicit re-exports. Every other name comes from a package module's ``__all__``
(``_NAMESPACE.sources``: ``flowjob_ops.api.array`` gives ``flow.reshape``, ...), from the face's
own submodules (``flow.math``, ``flow.optimizer``) or from the few ``aliases`` that rename; each is
imported on first use, and a name of a distribution that is not installed says what to install.
"""
from typing import Any

from flowjob_core import (
    FunctionConfig, clear_default_session, function_config, get_variable, global_function,
    sync_default_session)
from flowjob_core.api.model_io import load_variables
from flowjob_core.api.current_scope import current_scope
from flowjob_core.ir.dtypes import char, double, float, float16, float32, float64, int8, int32, int64, uint8
from flowjob_core.ir.dtypes import convert_oneflow_dtype_to_numpy_dtype, dtype, dtypes, half, int, long, record
from flowjob_core.ir.dtypes import tensor_buffer
from flowjob_core.api.function_desc import current_global_function_desc
from flowjob_core.api.env import current_resource  # legacy exported it as flow.env.current_resource too
from flowjob_core.api.model_io import get_all_variables, load, save  # legacy model I/O (v0.4; load/save of v0.3)
from flowjob_core.trace.eager_mode import enable_eager_execution
from flowjob_core.api.flow_config import eager_execution_enabled
from flowjob_core.api.call_counted_module import find_or_create_module
from flowjob_core.api.user_op import (
    builtin_op, consistent_user_op_builder, consistent_user_op_module_builder, user_op_builder, user_op_module_builder)

from oneflow._exports import LazyNamespace, Source
from oneflow._exports import ops as _ops
from oneflow.distributed import current_machine_id  # legacy's top-level name; the session's world answers
from oneflow.scope import deprecated_placement as device_prior_placement  # legacy's deprecated names of
from oneflow.scope import deprecated_placement as fixed_placement  # flow.scope.placement
from oneflow.deprecated import is_deprecated
from oneflow.deprecated import variable_scope as name_scope  # legacy's deprecated flow.scope.namespace
from oneflow._job_set import inter_job_reuse_mem_strategy
from oneflow._collectives import eager_nccl_all_reduce

__version__ = "0.1.0"

ExecutionConfig = FunctionConfig  # legacy v0.4's third name of the function config

_TYPING = Source("flowjob_typing", "flowjob-typing")

_NAMESPACE = LazyNamespace(
    "oneflow",
    __path__,
    sources=(
        _ops("array", "flow"), _ops("constants"), _ops("indexing"), _ops("padding"),  # flow.reshape, flow.constant, ...
        _ops("math", "flow"), _ops("reduce", "flow"), _ops("sorting", "flow"), _ops("segment"),  # flow.matmul, ...
        _ops("losses", "flow"), _ops("categorical", "flow"),  # flow.smooth_l1_loss, flow.ctc_loss, ...
        _ops("variables"), _ops("time_shape"),  # flow.assign; flow.repeat, flow.acc, flow.pack, flow.unpack
        _ops("tensor_buffer"),  # flow.tensor_to_tensor_buffer, flow.tensor_list_split, ...
        _ops("detection", "flow"),  # flow.object_bbox_flip, ... (also in flow.detection)
        _ops("initializers"),  # flow.*_initializer
        _ops("partial_fc"),  # flow.distributed_partial_fc_sample
        Source("flowjob_watch", "flowjob-watch", legacy=("watch", "watch_diff", "watch_scope")),  # and the sinks
        Source("flowjob_ofrecord.api.image_toplevel", "flowjob-ofrecord", legacy=("image_resize",)),  # flow.image_*
        _ops("size"),  # flow.Size
        Source("flowjob_core.imperative.tensor", "flowjob-core", namespace="flow"),  # v0.4's eager flow.Tensor
        _ops("tensor_methods", "flow"),  # flow.to (and the eager tensor's methods that run flowjob-ops' records)
        Source("flowjob_core.imperative.grad_mode", "flowjob-core", namespace="flow"),  # flow.no_grad
        Source("oneflow.model", "flowjob", namespace="flow"),  # flow.Model, also flow.model.Model
    ),
    # legacy names for differently named attributes
    aliases={"FixedTensorDef": (_TYPING, "fixed_tensor_def"), "MirroredTensorDef": (_TYPING, "mirrored_tensor_def"),
             "MirroredTensorListDef": (_TYPING, "mirrored_tensor_list_def")},
)

__all__ = [
    "FunctionConfig", "char", "clear_default_session", "double", "eager_execution_enabled", "float", "float16",
    "float32", "float64", "function_config", "get_variable", "global_function", "int32", "int64", "int8",
    "load_variables", "sync_default_session", "uint8",
]
__all__ += ["convert_oneflow_dtype_to_numpy_dtype", "dtype", "dtypes", "half", "int", "long", "record",
            "tensor_buffer"]  # dtype names
__all__ += ["ExecutionConfig", "current_global_function_desc", "eager_nccl_all_reduce", "inter_job_reuse_mem_strategy",
            "is_deprecated", "name_scope"]
__all__ += ["builtin_op", "find_or_create_module"]  # a registered op declared by argument names and called on blobs
__all__ += ["current_machine_id", "current_scope"]
__all__ += ["consistent_user_op_builder", "consistent_user_op_module_builder", "user_op_builder",
            "user_op_module_builder"]  # any registered op by name (flowjob_core/api/user_op.py)
__all__ += ["current_resource", "get_all_variables", "load", "save"]
__all__ += ["device_prior_placement", "fixed_placement"]
__all__ += ["enable_eager_execution"]  # ops run as the body calls them (flowjob_core/api/eager.py)
__all__ += _NAMESPACE.names()  # the face's submodules and the installed sources' names, read without importing


def __getattr__(name: str) -> Any:
    value = _NAMESPACE.resolve(name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMESPACE.names()))
