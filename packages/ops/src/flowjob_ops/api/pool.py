"""``flow.nn``'s max and average pooling, 1-D (the 2-D ops over a height of 1), 2-D and 3-D: thin calls of
the one implementation, ``_windows.pool_nodes``.

Legacy readings kept: "SAME" is "SAME_LOWER" for the 1-D and 3-D pools (an odd total's extra element
goes before); max_pool1d defaults to NWC, avg_pool1d to NCW (legacy v0.4 declared both, raising
NotImplementedError); max_pool3d / avg_pool3d take ``ceil_mode`` before ``name``, as legacy v0.4 did.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob

from flowjob_ops.api._windows import IntOrPair, IntOrTriple, pool_nodes


__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d"]


def max_pool2d(input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
               name: str | None = None, *, ceil_mode: bool = False) -> Blob:
    """Max over each ksize window (padding never wins; each window's gradient goes to its first maximum).

    Args:
        input: a 4-d floating blob in ``data_format``.
        ksize: the window, an int, (h, w) or 4 per-axis entries.
        strides: the step, an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``MaxPool2D_<n>``.
        ceil_mode: round the output size up instead of down.

    Returns:
        The pooled blob.
    """
    return pool_nodes("max", 2, input, ksize, strides, padding, data_format, ceil_mode, name)


def avg_pool2d(input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
               name: str | None = None, *, ceil_mode: bool = False) -> Blob:
    """Mean over each ksize window's real elements (padding is left out of the count).

    Args:
        input: a 4-d floating blob in ``data_format``.
        ksize: the window, an int, (h, w) or 4 per-axis entries.
        strides: the step, an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``AvgPool2D_<n>``.
        ceil_mode: round the output size up instead of down.

    Returns:
        The pooled blob.
    """
    return pool_nodes("avg", 2, input, ksize, strides, padding, data_format, ceil_mode, name)


def max_pool1d(input: Blob, ksize: int | Sequence[int], strides: int | Sequence[int], padding: Any,  # noqa: A002
               data_format: str = "NWC", name: str | None = None) -> Blob:
    """1-D max pooling: ``max_pool2d`` over a height of 1 (legacy v0.4 declared it, raising
    NotImplementedError; its arguments and the NWC default are kept).

    Args:
        input: a 3-d floating blob in data_format.
        ksize: the window: an int, a list of one, or 3 per-axis entries.
        strides: the step: an int, a list of one, or 3 per-axis entries.
        padding: "SAME" (= "SAME_LOWER", legacy pooling), "SAME_LOWER", "SAME_UPPER", "VALID" or
            3 (before, after) entries in data_format order.
        data_format: "NWC" or "NCW".
        name: the prefix P: nodes ``<P>_reshape_in``, the pooling ``P``, ``<P>_reshape_out``;
            default ``MaxPool1D_<n>``.

    Returns:
        The pooled blob.
    """
    return pool_nodes("max", 1, input, ksize, strides, padding, data_format, False, name)


def avg_pool1d(input: Blob, ksize: int | Sequence[int], strides: int | Sequence[int], padding: Any,  # noqa: A002
               data_format: str = "NCW", name: str | None = None) -> Blob:
    """1-D average pooling over each window's real elements: ``avg_pool2d`` over a height of 1
    (legacy v0.4 declared it with the NCW default, raising NotImplementedError).

    Args:
        input: a 3-d floating blob in data_format.
        ksize: the window: an int, a list of one, or 3 per-axis entries.
        strides: the step: an int, a list of one, or 3 per-axis entries.
        padding: "SAME" (= "SAME_LOWER", legacy pooling), "SAME_LOWER", "SAME_UPPER", "VALID" or
            3 (before, after) entries in data_format order.
        data_format: "NCW" or "NWC".
        name: the prefix P: nodes ``<P>_reshape_in``, the pooling ``P``, ``<P>_reshape_out``;
            default ``AvgPool1D_<n>``.

    Returns:
        The pooled blob.
    """
    return pool_nodes("avg", 1, input, ksize, strides, padding, data_format, False, name)


def max_pool3d(input: Blob, ksize: IntOrTriple, strides: IntOrTriple, padding: Any,  # noqa: A002
               data_format: str = "NCDHW", ceil_mode: bool = False, name: str | None = None) -> Blob:
    """Max over each 3-D window (padding never wins; each window's gradient goes to its first maximum).

    Args:
        input: a 5-d floating blob in data_format.
        ksize: the window: an int, or a list of 1, 3 or 5 (per-axis, batch and channel entries 1) ints.
        strides: the step, in ksize's forms.
        padding: "SAME" (= "SAME_LOWER", legacy), "SAME_LOWER", "SAME_UPPER", "VALID", or 5
            (before, after) entries in data_format order (3 spatial pairs are taken as they are).
        data_format: "NCDHW" or "NDHWC".
        ceil_mode: round the output size up instead of down.
        name: the op name; default ``MaxPool3D_<n>``.

    Returns:
        The pooled blob.
    """
    return pool_nodes("max", 3, input, ksize, strides, padding, data_format, ceil_mode, name)


def avg_pool3d(input: Blob, ksize: IntOrTriple, strides: IntOrTriple, padding: Any,  # noqa: A002
               data_format: str = "NCDHW", ceil_mode: bool = False, name: str | None = None) -> Blob:
    """Mean over each 3-D window's real elements (padding is left out of the count).

    Args:
        input: a 5-d floating blob in data_format.
        ksize: the window: an int, or a list of 1, 3 or 5 (per-axis, batch and channel entries 1) ints.
        strides: the step, in ksize's forms.
        padding: "SAME" (= "SAME_LOWER", legacy), "SAME_LOWER", "SAME_UPPER", "VALID", or 5
            (before, after) entries in data_format order (3 spatial pairs are taken as they are).
        data_format: "NCDHW" or "NDHWC".
        ceil_mode: round the output size up instead of down.
        name: the op name; default ``AvgPool3D_<n>``.

    Returns:
        The pooled blob.
    """
    return pool_nodes("avg", 3, input, ksize, strides, padding, data_format, ceil_mode, name)
