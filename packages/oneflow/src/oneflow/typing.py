"""``oneflow.typing``: annotations for global function parameters and results (from flowjob-typing)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_typing", "flowjob-typing"),)

__all__ = export(globals(), "oneflow.typing", *SOURCES)
