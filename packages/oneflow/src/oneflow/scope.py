"""``flow.scope``: namespaces, placements and logical views."""
from __future__ import annotations

import warnings

from flowjob_core.api.placement import placement
from flowjob_core.trace.scope import Placement, consistent_view, mirrored_view, namespace

__all__ = ["consistent_view", "mirrored_view", "namespace", "placement"]


def deprecated_placement(device_tag: str, machine_device_ids: str | list[str] | tuple[str, ...] = "0:0") -> Placement:
    """``flow.fixed_placement`` / ``flow.device_prior_placement``: legacy v0.4 kept both names as deprecated
    spellings of ``flow.scope.placement`` (same arguments, same scope), warning that they would go."""
    warnings.warn("flow.fixed_placement / flow.device_prior_placement will be removed, use flow.scope.placement",
                  DeprecationWarning, stacklevel=2)
    return placement(device_tag, machine_device_ids)
