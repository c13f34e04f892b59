"""``flow.deprecated``: names legacy kept for old programs (``flow.deprecated.nn.Module`` in ``nn``).

``variable_scope`` (also ``flow.name_scope``) is legacy's deprecated
spelling of ``flow.scope.namespace``: same scope, with a warning. The worker functions started and stopped
OneFlow processes on other machines over ssh (copying the OneFlow binary there); flowjob starts its ranks
with MPI instead, so they are refused with the way to do it here.
"""
from __future__ import annotations

import warnings
from typing import Any, ContextManager

from flowjob_core.trace.scope import namespace

from oneflow._refusal import refused
from oneflow.deprecated import nn
from oneflow.scope import deprecated_placement

__all__ = ["nn", "delete_worker", "delete_worker_by_bootstrap", "delete_worker_of_multi_process", "init_worker",
           "is_deprecated", "variable_scope"]

LAUNCH_HINT = ("flowjob starts the processes of a multi-machine run with MPI: python -m oneflow launch -n N "
               "[--hosts H1,H2] script.py (flowjob-mpi), or mpiexec; each rank runs the same program and there "
               "are no separate workers to start or delete")


def variable_scope(name: str) -> ContextManager[None]:
    """Legacy's deprecated ``flow.name_scope`` / ``flow.deprecated.variable_scope``: ``flow.scope.namespace(name)``
    (op and variable names inside get the prefix ``name-``), with a ``DeprecationWarning`` as legacy printed."""
    warnings.warn("flow.name_scope / flow.deprecated.variable_scope will be removed, use flow.scope.namespace",
                  DeprecationWarning, stacklevel=2)
    return namespace(name)


init_worker = refused("flow.deprecated.init_worker", LAUNCH_HINT)
delete_worker = refused("flow.deprecated.delete_worker", LAUNCH_HINT)
delete_worker_by_bootstrap = refused("flow.deprecated.delete_worker_by_bootstrap", LAUNCH_HINT)
delete_worker_of_multi_process = refused("flow.deprecated.delete_worker_of_multi_process", LAUNCH_HINT)


def is_deprecated(func_or_class: Any) -> bool:
    """Legacy ``flow.is_deprecated``: whether a face function is one of legacy's deprecated spellings (it warns
    when called): ``flow.name_scope`` / ``flow.deprecated.variable_scope``, ``flow.fixed_placement`` /
    ``flow.device_prior_placement``."""
    return any(func_or_class is f for f in (variable_scope, deprecated_placement))
