"""``flow.optimizer`` (from flowjob-optim)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_optim.api", "flowjob-optim"),)

__all__ = export(globals(), "flow.optimizer", *SOURCES)
