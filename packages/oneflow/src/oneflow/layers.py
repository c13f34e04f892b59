"""``flow.layers`` (from flowjob-ops)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ops.layers", "flowjob-ops"),)

__all__ = export(globals(), "flow.layers", *SOURCES)
