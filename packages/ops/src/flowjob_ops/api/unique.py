"""``flow.experimental`` names of legacy v0.4 that lazy jobs use: ``unique_with_counts``."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import build_error


__all__ = ["unique_with_counts"]


def unique_with_counts(x: Blob, out_idx: Any = dtypes.int32, name: str | None = None) -> tuple[Blob, Blob, Blob, Blob]:
    """The distinct values of a 1-d blob, legacy ``flow.experimental.unique_with_counts``.

    Args:
        x: a 1-d blob (``flow.flatten`` a larger one first).
        out_idx: the integer type of ``idx``, ``count`` and ``num_unique``: flow.int32 (default) or flow.int64.
        name: the op name; default ``UniqueWithCounts_<n>``.

    Returns:
        ``(y, idx, count, num_unique)``: ``y`` (x's shape) holds the distinct values in order of first
        appearance, then zeros; ``idx[i]`` is the place of ``x[i]`` in ``y``; ``count`` (x's shape) how
        often each value occurs, then zeros; ``num_unique`` (shape (1,)) how many distinct values there are.
    """
    what = "flow.experimental.unique_with_counts"
    if not isinstance(x, Blob):
        raise build_error(what, f"x must be a blob, got {type(x).__name__}")
    try:
        index_type = dtypes.as_dtype(out_idx)
    except Exception as exc:  # as_dtype names what it could not read
        raise build_error(what, f"out_idx: {exc}") from None
    if index_type not in (dtypes.int32, dtypes.int64):
        raise build_error(what, f"out_idx must be flow.int32 or flow.int64, got {index_type}")
    return apply("unique_with_counts", [x], {"out_idx": index_type}, name=name)
