"""``flow.advanced``: one piece per device of a blob, legacy's ``distribute_*`` (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("distribute"),)

__all__ = export(globals(), "flow.advanced", *SOURCES)
