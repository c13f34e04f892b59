"""flowjob core: the job IR, tracer, plugin host, autodiff, planner, executor and numpy backend.

Explicit re-exports only; nothing is created at import (sessions and plugin managers are
made on first use).
"""
from flowjob_core.ir import dtypes
from flowjob_core.trace import scope
from flowjob_core.api import flow_config as settings
from flowjob_core.passes.autodiff import GradContext
from flowjob_core.trace.blob import Blob
from flowjob_core.config.function_config import FunctionConfig, function_config
from flowjob_core.errors import (
    CheckpointError, ConfigError, FlowjobError, JobArgumentError, JobDefinitionError, JobReturnError,
    MissingPackageError, OpBuildError, PluginError, SavedModelError, ShapeError, VariableError)
from flowjob_core.runtime.executor import PendingCall
from flowjob_core.api.function import JobFunction, global_function
from flowjob_core.ir.job import BlobSpec, Intent, Job, Node, SideOutput
from flowjob_core.ir.kernel import Kernel
from flowjob_core.ir.opdef import Compute, Effects, Elementwise, KernelContext, LegacyFace, OpDef, ShapeTraits
from flowjob_core.plugins.host import ENTRY_POINT_GROUP, hookimpl, make_plugin_manager
from flowjob_core.plugins.registry import Backend
from flowjob_core.runtime.results import InputSpec, ParamKind, ReturnKind
from flowjob_core.runtime.session import Session, clear_default_session, get_default_session, sync_default_session
from flowjob_core.trace.builder import apply, current_builder, maybe_builder
from flowjob_core.api.variables import add_loss, get_variable

__version__ = "0.1.0"

__all__ = [
    "Backend", "Blob", "BlobSpec", "CheckpointError", "Compute", "ConfigError", "ENTRY_POINT_GROUP", "Effects",
    "Elementwise", "FlowjobError", "FunctionConfig", "GradContext", "InputSpec", "Intent", "Job", "JobArgumentError",
    "JobDefinitionError", "JobFunction", "JobReturnError", "Kernel", "KernelContext", "LegacyFace",
    "MissingPackageError", "Node", "OpBuildError", "OpDef", "ParamKind", "PendingCall", "PluginError", "ReturnKind",
    "SavedModelError", "Session", "ShapeError", "ShapeTraits", "SideOutput", "VariableError", "add_loss", "apply",
    "clear_default_session", "current_builder", "dtypes",
    "function_config", "get_default_session", "get_variable", "global_function", "hookimpl",
    "make_plugin_manager", "maybe_builder", "scope", "settings", "sync_default_session",
]
