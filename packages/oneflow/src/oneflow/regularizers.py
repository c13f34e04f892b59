"""``flow.regularizers`` (from flowjob-optim)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_optim.regularizers", "flowjob-optim"),)

__all__ = export(globals(), "flow.regularizers", *SOURCES)
