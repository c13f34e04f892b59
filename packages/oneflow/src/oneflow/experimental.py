"""``flow.experimental`` (from flowjob-ops): the v0.4 names lazy jobs use (``unique_with_counts``,
``square_sum``, ``indexed_slices_reduce_sum``)."""
from oneflow._exports import export, ops

SOURCES = (ops("unique"), ops("square_sum"), ops("indexed_slices"))

__all__ = export(globals(), "flow.experimental", *SOURCES)
