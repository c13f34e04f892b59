"""The exceptions flowjob raises. Each names the job, argument, op or variable at fault."""
from __future__ import annotations


class FlowjobError(Exception):
    """Base of every error flowjob raises on purpose."""


class ShapeError(FlowjobError, ValueError):
    """An op's inputs or attributes do not fit its inference rule."""


class OpBuildError(FlowjobError, ValueError):
    """Raised while tracing: an op could not be built. Names the job, op and user source line."""


class JobDefinitionError(FlowjobError, TypeError):
    """A global function's signature or annotations cannot be used."""


class JobArgumentError(FlowjobError, TypeError):
    """A call passed arguments that do not match the job's placeholders."""


class JobReturnError(FlowjobError, TypeError):
    """The body's return value does not match the return annotation."""


class PluginError(FlowjobError, RuntimeError):
    """A plugin is missing, broken or registered something twice."""


class MissingPackageError(FlowjobError, ImportError):
    """A name needs a flowjob distribution that is not installed."""


class VariableError(FlowjobError, ValueError):
    """A variable is missing, redefined differently, or its stored value does not fit."""


class ConfigError(FlowjobError, AttributeError):
    """An unknown configuration option or a value of the wrong type."""


class CheckpointError(FlowjobError, OSError):
    """A checkpoint cannot be saved or loaded."""


class SavedModelError(FlowjobError, ValueError):
    """A saved model cannot be written, found, read or run as asked (legacy raised ``ValueError``)."""


class OutsideJobError(FlowjobError, NotImplementedError):
    """A call that is only valid while a global function body is traced, made outside one (legacy's dispatch
    found no implementation for that mode and raised ``NotImplementedError``)."""
