"""``flow.autograd``: gradients of v0.4's eager tensors (from flowjob-core)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_core.imperative.autograd", "flowjob-core"),)

__all__ = export(globals(), "flow.autograd", *SOURCES)
