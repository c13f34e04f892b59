"""``flow.experimental`` (from flowjob-ops): the v0.4 names lazy jobs use (``unique_with_counts``)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ops.experimental", "flowjob-ops"),)

__all__ = export(globals(), "flow.experimental", *SOURCES)
