"""Segment sums (legacy v0.4, in ``flow`` and ``flow.math`` alike): unsorted_segment_sum,
unsorted_segment_sum_like and unsorted_batch_segment_sum."""
from __future__ import annotations

from flowjob_core import Blob, apply


__all__ = ["unsorted_batch_segment_sum", "unsorted_segment_sum", "unsorted_segment_sum_like"]


def unsorted_segment_sum(data: Blob, segment_ids: Blob, num_segments: int, axis: int = 0,
                         name: str | None = None) -> Blob:
    """Sums of ``data`` by segment: ``out[..., s, ...]`` adds every slice whose id is ``s``.

    Args:
        data: a numeric blob.
        segment_ids: integer ids shaped like the axes of data from ``axis`` on (one or more).
        num_segments: the number of segments; ids outside ``[0, num_segments)`` add nothing.
        axis: the first axis of data the ids cover.
        name: the op name; default ``UnsortedSegmentSum_<n>``.

    Returns:
        ``data.shape[:axis] + (num_segments,) + data.shape[axis + segment_ids.ndim:]``.
    """
    attrs = {"axis": axis, "num_segments": num_segments}
    return apply("unsorted_segment_sum", [data, segment_ids], attrs, name=name)


def unsorted_segment_sum_like(data: Blob, segment_ids: Blob, like: Blob, axis: int = 0,
                              name: str | None = None) -> Blob:
    """``unsorted_segment_sum`` with the output shape (and num_segments) taken from ``like``.

    Args:
        data: a numeric blob.
        segment_ids: integer ids shaped like the axes of data from ``axis`` on.
        like: a blob of data's dtype and the result's shape; only its shape is read.
        axis: the first axis of data the ids cover.
        name: the op name; default ``UnsortedSegmentSumLike_<n>``.
    """
    return apply("unsorted_segment_sum_like", [data, segment_ids, like], {"axis": axis}, name=name)


def unsorted_batch_segment_sum(data: Blob, segment_ids: Blob, num_segments: int, name: str | None = None) -> Blob:
    """A segment sum per batch position: ids of shape ``data.shape[:m]`` sum axis ``m - 1`` of data
    separately for each index of the first ``m - 1`` axes.

    Args:
        data: a numeric blob.
        segment_ids: integer ids, shape ``data.shape[:m]``.
        num_segments: the number of segments; ids outside ``[0, num_segments)`` add nothing.
        name: the op name; default ``UnsortedBatchSegmentSum_<n>``.

    Returns:
        data's shape with axis ``m - 1`` replaced by ``num_segments``.
    """
    return apply("unsorted_batch_segment_sum", [data, segment_ids], {"num_segments": num_segments}, name=name)
