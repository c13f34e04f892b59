"""``flow.nn``'s max and average pooling, 1-D (the 2-D ops over a height of 1), 2-D and 3-D.

Legacy readings kept: "SAME" is "SAME_LOWER" for the 1-D and 3-D pools (an odd total's extra element
goes before); max_pool1d defaults to NWC, avg_pool1d to NCW (legacy v0.4 declared both, raising
NotImplementedError); max_pool3d / avg_pool3d take ``ceil_mode`` before ``name``, as legacy v0.4 did.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.api._windows import (
    FORMATS_1D, IntOrPair, IntOrTriple, ceil_pads_3d, ceil_padding, check_5d, format_1d, format_3d, from_2d, one_int,
    padding_1d, padding_3d, spatial, to_2d, triple)


__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d"]


def _pool(op: str, input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any,  # noqa: A002
          data_format: str, name: str | None, ceil_mode: bool) -> Blob:
    ksize, strides = spatial(ksize, data_format, "ksize"), spatial(strides, data_format, "strides")
    if ceil_mode and isinstance(input, Blob) and len(input.shape) == 4:
        try:
            padding = ceil_padding(input, ksize, strides, padding, data_format)
        except ValueError as exc:  # the op's inference would say the same, naming the op
            raise build_error(f"flow.nn.{op}", str(exc)) from None
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": data_format}
    return apply(op, [input], attrs, name=name)


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
    return _pool("max_pool2d", input, ksize, strides, padding, data_format, name, ceil_mode)


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
    return _pool("avg_pool2d", input, ksize, strides, padding, data_format, name, ceil_mode)


def _pool1d(op: str, prefix: str, input: Blob, ksize: Any, strides: Any, padding: Any,  # noqa: A002
            data_format: str, name: str | None) -> Blob:
    what = f"flow.nn.{op.replace('2d', '1d')}"
    fmt = format_1d(what, data_format)
    k, s = one_int(what, "ksize", ksize, fmt), one_int(what, "strides", strides, fmt)
    pad = padding_1d(what, padding, fmt)
    node = op_name(name, prefix)
    x = to_2d(what, input, "input", fmt, f"{node}_reshape_in")
    attrs = {"ksize": (1, k), "strides": (1, s), "padding": pad, "data_format": FORMATS_1D[fmt]}
    return from_2d(apply(op, [x], attrs, name=node), fmt, f"{node}_reshape_out")


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
    return _pool1d("max_pool2d", "MaxPool1D", input, ksize, strides, padding, data_format, name)


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
    return _pool1d("avg_pool2d", "AvgPool1D", input, ksize, strides, padding, data_format, name)


def _pool3d(op: str, prefix: str, input: Blob, ksize: Any, strides: Any, padding: Any,  # noqa: A002
            data_format: str, ceil_mode: bool, name: str | None) -> Blob:
    what = f"flow.nn.{op}"
    fmt = format_3d(what, data_format)
    check_5d(what, "input", input, fmt)
    k = triple(what, "ksize", ksize, fmt, True)
    s = triple(what, "strides", strides, fmt, True)
    pad = padding_3d(what, padding, fmt)
    if not isinstance(ceil_mode, bool):
        raise build_error(what, f"ceil_mode must be a bool, got {ceil_mode!r}")
    if ceil_mode:
        pad = ceil_pads_3d(what, input, k, s, pad, fmt)
    attrs = {"ksize": k, "strides": s, "padding": pad, "data_format": fmt}
    return apply(op, [input], attrs, name=op_name(name, prefix))


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
    return _pool3d("max_pool3d", "MaxPool3D", input, ksize, strides, padding, data_format, ceil_mode, name)


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
    return _pool3d("avg_pool3d", "AvgPool3D", input, ksize, strides, padding, data_format, ceil_mode, name)
