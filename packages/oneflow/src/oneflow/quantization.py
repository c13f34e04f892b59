"""``flow.quantization``: fake quantization and the min-max observers (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("quantization"),)

__all__ = export(globals(), "flow.quantization", *SOURCES)
