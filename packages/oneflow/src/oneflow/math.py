"""``flow.math`` (from flowjob-ops)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ops.math", "flowjob-ops"),)

__all__ = export(globals(), "flow.math", *SOURCES)
