"""``flow.scope.placement``: a placement scope, its device tag checked against the session's backends.

The scope itself (a context of the tracer) lives in :mod:`flowjob_core.trace.scope`; checking a tag needs
the session being traced, so the user-facing constructor lives here, above the session.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from flowjob_core.plugins.registry import LEGACY_DEVICE_TAGS
from flowjob_core.trace.scope import DEVICE_IDS, Placement
from flowjob_core.runtime.session import get_default_session
from flowjob_core.trace.builder import maybe_builder


def placement(device_tag: str, machine_device_ids: str | list[str] | tuple[str, ...] = "0:0",
              hierarchy: Sequence[int] | None = None) -> Placement:
    """Ops traced inside run on ``device_tag``: a registered backend's tag, or legacy ``cpu``/``gpu``.

    ``hierarchy`` (legacy v0.4's 2-D parallel layout, e.g. ``(machines, devices)``) must multiply out to the
    number of devices named; it is checked and has no further effect, as ``flow.hierarchical_parallel_cast``'s
    distributions have none (a blob's layout over devices is the view's, see docs/distributed.md)."""
    _check_device_tag(device_tag)
    ids = (machine_device_ids,) if isinstance(machine_device_ids, str) else tuple(machine_device_ids)
    for item in ids:
        if not isinstance(item, str) or not DEVICE_IDS.match(item):
            raise ValueError(
                f"flow.scope.placement: machine_device_ids must look like '0:0' or '0:0-3', got {item!r}")
    scope = Placement(device_tag, ids)
    if hierarchy is not None:
        levels = tuple(hierarchy) if isinstance(hierarchy, (list, tuple)) else ()
        if not levels or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in levels):
            raise ValueError(f"flow.scope.placement: hierarchy must be a tuple of positive ints, got {hierarchy!r}")
        if math.prod(levels) != scope.device_count:
            raise ValueError(f"flow.scope.placement: hierarchy {levels} holds {math.prod(levels)} devices, "
                             f"machine_device_ids {list(ids)} name {scope.device_count}")
    return scope


def _check_device_tag(device_tag: Any) -> None:
    """A ValueError naming the registered tags unless a backend of the session being traced (else the
    default session's) has ``device_tag``; the legacy tags are always accepted, without a session."""
    if not isinstance(device_tag, str) or not device_tag:
        raise ValueError(f"flow.scope.placement: device_tag must be a non-empty string, got {device_tag!r}")
    if device_tag in LEGACY_DEVICE_TAGS:
        return
    builder = maybe_builder()
    backends = (builder.session if builder is not None else get_default_session()).registries.backends
    if not backends.accepts(device_tag):
        raise ValueError(f"flow.scope.placement: device_tag {backends.unknown_tag_message(device_tag)}")
