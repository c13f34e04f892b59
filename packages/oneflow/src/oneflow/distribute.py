"""``flow.distribute``: logical views (version-0.1 names) and how a blob or variable lies over devices."""
from __future__ import annotations

from flowjob_core.api.current_scope import consistent_view_enabled, mirrored_view_enabled
from flowjob_core.ir.distribute import (
    AutoDistribute, BroadcastDistribute, Distribute, SplitDistribute, assert_is_valid_distribute, auto, broadcast,
    split)
from flowjob_core.trace.scope import LogicalView


def mirrored_strategy() -> LogicalView:
    """Version 0.1's name of ``flow.scope.mirrored_view()``."""
    return LogicalView("mirrored")


def consistent_strategy() -> LogicalView:
    """Version 0.1's name of ``flow.scope.consistent_view()``."""
    return LogicalView("consistent")


def mirrored_strategy_enabled() -> bool:
    """Version 0.1's name of ``flow.scope.mirrored_view_enabled()``."""
    return mirrored_view_enabled()


def consistent_strategy_enabled() -> bool:
    """Version 0.1's name of ``flow.scope.consistent_view_enabled()``."""
    return consistent_view_enabled()


__all__ = ["AutoDistribute", "BroadcastDistribute", "Distribute", "SplitDistribute", "assert_is_valid_distribute",
           "auto", "broadcast", "consistent_strategy", "consistent_strategy_enabled", "mirrored_strategy",
           "mirrored_strategy_enabled", "split"]
