"""Legacy ``flow.deprecated.nn.Module`` (v0.3's module of the job-function API, not v0.4's eager one).

A named callable that runs ``forward`` and counts its calls; legacy's module op builders read the count to
tell the calls apart. Lazy mode: ``forward`` traces ops like any job body code.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core.errors import OpBuildError
from flowjob_core.ir import naming
from flowjob_core.trace.builder import current_builder


class Module:
    """Subclass it and override ``forward``; ``module(*args)`` calls ``forward`` and then counts the call."""

    def __init__(self, name: str | None = None) -> None:
        self.module_name_ = naming.unique_name("Module") if name is None else name
        self.call_seq_no_ = 0

    @property
    def module_name(self) -> str:
        return self.module_name_

    @property
    def call_seq_no(self) -> int:
        """How many calls have returned."""
        return self.call_seq_no_

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args: Any) -> Any:
        result = self.forward(*args)
        self.call_seq_no_ += 1
        return result

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # legacy asserted this when a module was deleted; refusing at the class statement says it sooner
        super().__init_subclass__(**kwargs)
        if cls.__call__ is not Module.__call__:
            raise TypeError(f"{cls.__name__}: flow.deprecated.nn.Module subclasses override forward(), not __call__")


def find_or_create_module(module_name: str, create: Callable[[], Module], reuse: bool = False) -> Module:
    """Legacy ``flow.find_or_create_module``: the job's module named ``module_name``, made by ``create()`` on
    first use. Asking again for a name the job already made is an error unless ``reuse`` is True."""
    builder = current_builder("flow.find_or_create_module")
    if not callable(create):
        raise OpBuildError(f"job {builder.job.name!r}: flow.find_or_create_module({module_name!r}): create must be "
                           f"callable, got {type(create).__name__}")
    if module_name in builder.modules:
        if not reuse:
            raise OpBuildError(f"job {builder.job.name!r}: flow.find_or_create_module: module {module_name!r} "
                               f"was already made in this job (pass reuse=True to share it)")
        return builder.modules[module_name]
    module = create()
    if not isinstance(module, Module):
        raise OpBuildError(f"job {builder.job.name!r}: flow.find_or_create_module({module_name!r}): create() must "
                           f"return a flow.deprecated.nn.Module, got {type(module).__name__}")
    builder.modules[module_name] = module
    return module


__all__ = ["Module"]  # flow.deprecated.nn; find_or_create_module is top-level (oneflow/__init__.py)
