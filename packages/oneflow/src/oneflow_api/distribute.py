"""``oneflow_api.distribute``: the distribution types and constructors (``flow.distribute`` uses them)."""
from __future__ import annotations

from flowjob_core.ir.distribute import (
    AutoDistribute, BroadcastDistribute, Distribute, SplitDistribute, auto, broadcast, split)

__all__ = ["AutoDistribute", "BroadcastDistribute", "Distribute", "SplitDistribute", "auto", "broadcast", "split"]
