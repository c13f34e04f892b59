"""Whether job functions run eagerly: legacy's process-wide ``flow.enable_eager_execution`` switch.

Kept apart from the eager runner (``flowjob_core.api.eager``) so that low-level modules (blobs, the
function wrapper, ``flow.config``) can read the mode without importing the planner and tracer.
"""
from __future__ import annotations

import numpy as np

from flowjob_core.errors import FlowjobError

_enabled = False


def enable_eager_execution(val: bool = True) -> None:
    """Legacy ``flow.enable_eager_execution(val=True)``: job functions called from now on run their body op
    by op (``False`` goes back to lazy mode). Process-wide, as legacy's switch was."""
    global _enabled
    if not isinstance(val, (bool, np.bool_)):
        raise FlowjobError(f"flow.enable_eager_execution expects True or False, got {val!r}")
    _enabled = bool(val)


def enabled() -> bool:
    return _enabled
