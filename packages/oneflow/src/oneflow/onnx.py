"""``flow.onnx`` (from flowjob-ops; writing a model needs its ``onnx`` extra): ``export``."""
from oneflow._exports import Source
from oneflow._exports import export as _export  # flow.onnx.export is legacy's name for the exporter

SOURCES = (Source("flowjob_ops.export.onnx_export", "flowjob-ops", legacy=("export",)),)

__all__ = _export(globals(), "flow.onnx", *SOURCES)
