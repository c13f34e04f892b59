"""``oneflow.python.framework.distribute``: legacy's path of the ``flow.distribute`` functions and the
logical-view queries it defined (``flow.scope.mirrored_view_enabled`` ...)."""
from __future__ import annotations

from oneflow.distribute import (
    AutoDistribute, BroadcastDistribute, Distribute, SplitDistribute, assert_is_valid_distribute, auto, broadcast,
    consistent_strategy, consistent_strategy_enabled, mirrored_strategy, mirrored_strategy_enabled, split)
from oneflow.scope import consistent_view_enabled, mirrored_view_enabled

# legacy's own names of the view queries in this module
ConsistentStrategyEnabled = consistent_view_enabled
MirroredStrategyEnabled = mirrored_view_enabled

__all__ = ["AutoDistribute", "BroadcastDistribute", "ConsistentStrategyEnabled", "Distribute",
           "MirroredStrategyEnabled", "SplitDistribute", "assert_is_valid_distribute", "auto", "broadcast",
           "consistent_strategy", "consistent_strategy_enabled", "consistent_view_enabled", "mirrored_strategy",
           "mirrored_strategy_enabled", "mirrored_view_enabled", "split"]
