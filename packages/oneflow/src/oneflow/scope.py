"""``flow.scope``: namespaces, placements and logical views."""
from __future__ import annotations

import warnings

from flowjob_core.api.current_scope import Scope, consistent_view_enabled, mirrored_view_enabled
from flowjob_core.api.current_scope import current_scope as _current_scope
from flowjob_core.api.placement import placement
from flowjob_core.trace.scope import Placement, consistent_view, mirrored_view, namespace

__all__ = ["consistent_view", "consistent_view_enabled", "current_scope", "mirrored_view", "mirrored_view_enabled",
           "namespace", "placement"]


def current_scope() -> Scope:
    """Legacy v0.4's deprecated spelling of ``flow.current_scope()`` (it warned that it would go)."""
    warnings.warn("flow.scope.current_scope will be removed, use flow.current_scope", DeprecationWarning,
                  stacklevel=2)
    return _current_scope()


def deprecated_placement(device_tag: str, machine_device_ids: str | list[str] | tuple[str, ...] = "0:0") -> Placement:
    """``flow.fixed_placement`` / ``flow.device_prior_placement``: legacy v0.4 kept both names as deprecated
    spellings of ``flow.scope.placement`` (same arguments, same scope), warning that they would go."""
    warnings.warn("flow.fixed_placement / flow.device_prior_placement will be removed, use flow.scope.placement",
                  DeprecationWarning, stacklevel=2)
    return placement(device_tag, machine_device_ids)
