"""``flow.layers`` (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("layers"), ops("normalization_layers"), ops("categorical", "flow.layers"))

__all__ = export(globals(), "flow.layers", *SOURCES)
