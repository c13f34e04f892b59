"""``flow.nn.init``: in-place initialization of a variable's or array's values (from flowjob-ops)."""
from oneflow._exports import export, ops

SOURCES = (ops("nn_init"),)

__all__ = export(globals(), "flow.nn.init", *SOURCES)
