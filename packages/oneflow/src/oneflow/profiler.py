"""``flow.profiler``: host and graph profiler ranges (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("profiling"),)

__all__ = export(globals(), "flow.profiler", *SOURCES)
