"""``flow.random``: legacy random ops (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("random"),)

__all__ = export(globals(), "flow.random", *SOURCES)
