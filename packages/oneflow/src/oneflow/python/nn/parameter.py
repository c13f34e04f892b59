"""``oneflow.python.nn.parameter``: legacy v0.4's path of ``flow.nn.Parameter`` (its tests imported it so)."""
from __future__ import annotations

from oneflow.nn import Parameter

__all__ = ["Parameter"]
