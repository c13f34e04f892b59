"""``flow.system``: ``flow.system.assign`` (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("system"),)

__all__ = export(globals(), "flow.system", *SOURCES)
