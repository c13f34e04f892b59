"""``flow.experimental.indexed_slices_reduce_sum`` (legacy v0.4): rows sharing an index summed."""
from __future__ import annotations

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error

__all__ = ["indexed_slices_reduce_sum"]


def indexed_slices_reduce_sum(indices: Blob, values: Blob, name: str | None = None) -> tuple[Blob, Blob, Blob]:
    """Sum the rows of ``values`` that share an index, one row per distinct index.

    Args:
        indices: an int32 or int64 blob of row indices.
        values: a blob whose shape starts with ``indices``' shape; the rest is one row.
        name: the op name; default ``IndexedSlicesReduceSum_<n>``.

    Returns:
        ``(y_indices, y_values, num_unique)``: one element / row per index given; the first ``num_unique``
        (a (1,) int64 blob) hold the distinct indices in ascending order and the sums of their rows, the
        rest are 0.
    """
    what = "flow.experimental.indexed_slices_reduce_sum"
    for arg, blob in (("indices", indices), ("values", values)):
        if not isinstance(blob, Blob):
            raise build_error(what, f"{arg} must be a blob, got {type(blob).__name__}")
    y_indices, y_values, num_unique = apply("indexed_slices_reduce_sum", [indices, values], {}, name=name)
    return y_indices, y_values, num_unique
