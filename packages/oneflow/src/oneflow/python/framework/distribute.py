"""``oneflow.python.framework.distribute``: legacy's path of the ``flow.distribute`` functions."""
from __future__ import annotations

from oneflow.distribute import Distribute, auto, broadcast, consistent_strategy, mirrored_strategy, split

__all__ = ["Distribute", "auto", "broadcast", "consistent_strategy", "mirrored_strategy", "split"]
