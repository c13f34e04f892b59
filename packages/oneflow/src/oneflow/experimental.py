"""``flow.experimental`` (from flowjob-ops): the v0.4 names lazy jobs use (``unique_with_counts``)."""
from oneflow._exports import export, ops

SOURCES = (ops("unique"),)

__all__ = export(globals(), "flow.experimental", *SOURCES)
