"""``flow.linalg``: legacy's second home of ``matmul`` (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("math", "flow.linalg"),)

__all__ = export(globals(), "flow.linalg", *SOURCES)
