"""``flow.nn``: neural-network ops (from flowjob-ops)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ops.nn", "flowjob-ops"),)

__all__ = export(globals(), "flow.nn", *SOURCES)
