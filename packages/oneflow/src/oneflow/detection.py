"""``flow.detection`` (from flowjob-ops): boxes and polygons of tensor buffers flipped, scaled, drawn into masks."""
from oneflow._exports import export, ops

SOURCES = (ops("detection", "flow.detection"),)

__all__ = export(globals(), "flow.detection", *SOURCES)
