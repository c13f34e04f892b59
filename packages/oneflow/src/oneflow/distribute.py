"""``flow.distribute``: logical views (version-0.1 names) and variable distribution."""
from __future__ import annotations

from dataclasses import dataclass

from flowjob_core.trace.scope import LogicalView


def mirrored_strategy() -> LogicalView:
    return LogicalView("mirrored")


def consistent_strategy() -> LogicalView:
    return LogicalView("consistent")


@dataclass(frozen=True)
class Distribute:
    """How a variable is laid out over devices: broadcast (replicated) or split along an axis."""

    kind: str
    axis: int | None = None


def auto() -> Distribute:
    """Let the system choose the layout (one device: the variable is whole)."""
    return Distribute("auto")


def broadcast() -> Distribute:
    return Distribute("broadcast")


def split(axis: int) -> Distribute:
    return Distribute("split", axis)


__all__ = ["Distribute", "auto", "broadcast", "consistent_strategy", "mirrored_strategy", "split"]
