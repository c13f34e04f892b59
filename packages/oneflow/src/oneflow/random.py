"""``flow.random``: legacy random ops (from flowjob-ops)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ops.random_ops", "flowjob-ops"),)

__all__ = export(globals(), "flow.random", *SOURCES)
