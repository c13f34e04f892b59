"""``flow.data``: datasets (from flowjob-data)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_data", "flowjob-data"),)

__all__ = export(globals(), "flow.data", *SOURCES)
