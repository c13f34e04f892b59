"""``flow.math`` (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("math", "flow.math"), ops("reduce", "flow.math"), ops("comparisons"), ops("sorting", "flow.math"),
           ops("segment"), ops("triangular"), ops("array", "flow.math"))

__all__ = export(globals(), "flow.math", *SOURCES)
