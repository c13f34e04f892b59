"""Top-level padding functions of ``flow``: pad and its inverse crop pad_grad, the 2-D paddings of NCHW
blobs (constant, zero, reflection, replication) and same_padding.

Node names follow legacy's (``Constant_Pad2d_<n>``), so programs that watch or look up nodes by name find
them.
"""
from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.records.common import is_int


__all__ = ["constant_pad2d", "pad", "pad_grad", "reflection_pad2d", "replication_pad2d", "same_padding",
           "zero_pad2d"]


def _paddings(x: Blob, paddings: Any, what: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not isinstance(paddings, (list, tuple)) or len(paddings) != len(x.shape):
        raise build_error(what, f"paddings must be a list or tuple of one (before, after) pair per axis of "
                                f"{x.shape}, got {paddings!r}")
    if any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in paddings):
        raise build_error(what, f"each entry of paddings must be a (before, after) pair, got {paddings!r}")
    return tuple(p[0] for p in paddings), tuple(p[1] for p in paddings)


def pad(x: Blob, paddings: Sequence[Sequence[int]], constant_value: float | int = 0, name: str | None = None) -> Blob:
    """``x`` surrounded by ``constant_value``.

    Args:
        x: a blob.
        paddings: one ``(before, after)`` pair of non-negative ints per axis of x.
        constant_value: the value of the new elements (truncated to an int for integer blobs).
        name: the op name; default ``Pad_<n>``.

    Returns:
        A blob of shape ``x.shape[i] + before[i] + after[i]``.
    """
    before, after = _paddings(x, paddings, "flow.pad")
    if x.dtype.kind not in "fc":  # legacy keeps an integral constant for integer blobs
        constant_value = int(constant_value)
    attrs = {"padding_before": before, "padding_after": after, "constant_value": constant_value}
    return apply("pad", [x], attrs, name=name)


def pad_grad(x: Blob, paddings: Sequence[Sequence[int]], constant_value: float | int = 0,
             name: str | None = None) -> Blob:
    """The inverse crop of ``flow.pad``: ``x`` without its padding (a ``slice`` node).

    Args:
        x: a padded blob (a gradient of pad's output, in legacy's use).
        paddings: the ``(before, after)`` pairs pad was given.
        constant_value: ignored (legacy argument).
        name: the op name; default ``PadGrad_<n>``.

    Returns:
        A blob of shape ``x.shape[i] - before[i] - after[i]``.
    """
    before, after = _paddings(x, paddings, "flow.pad_grad")
    size = tuple(d - b - a for d, b, a in zip(x.shape, before, after))
    if any(b < 0 or a < 0 for b, a in zip(before, after)) or any(s < 1 for s in size):
        raise build_error("flow.pad_grad", f"paddings {tuple(paddings)!r} do not fit inside {x.shape}")
    return apply("slice", [x], {"begin": before, "size": size}, name=op_name(name, "PadGrad"))


def _boundary(x: Blob, padding: Any, what: str) -> tuple[int, int, int, int]:
    """(left, right, top, bottom) from an int or a 4-list, checked as legacy: NCHW, each pad below the size."""
    if len(x.shape) != 4:
        raise build_error(what, f"x must be an NCHW blob of rank 4, got shape {x.shape}")
    h, w = x.shape[2], x.shape[3]
    if is_int(padding):
        pads = (int(padding),) * 4
    elif isinstance(padding, (list, tuple)) and len(padding) == 4 and all(is_int(p) for p in padding):
        pads = tuple(int(p) for p in padding)
    else:
        raise build_error(what, f"padding must be an int or 4 ints (left, right, top, bottom), got {padding!r}")
    left, right, top, bottom = pads
    if min(pads) < 0 or max(top, bottom) >= h or max(left, right) >= w:
        raise build_error(what, f"padding {padding!r} must be >= 0 and smaller than the input's height {h} "
                                f"(top, bottom) and width {w} (left, right)")
    return left, right, top, bottom


def constant_pad2d(x: Blob, padding: int | Sequence[int], constant_value: float | int = 0,
                   name: str | None = None) -> Blob:
    """An NCHW blob padded on H and W with ``constant_value``.

    Args:
        x: an NCHW blob.
        padding: an int for every side, or (left, right, top, bottom); each smaller than the side it pads.
        constant_value: the fill (truncated to an int for integer blobs, as legacy).
        name: the op name; default ``Constant_Pad2d_<n>``.

    Returns:
        A blob of shape (N, C, H + top + bottom, W + left + right); its gradient is a crop.
    """
    return _constant_pad2d(x, padding, constant_value, op_name(name, "Constant_Pad2d"), "flow.constant_pad2d")


def _constant_pad2d(x: Blob, padding: Any, value: Any, name: str, what: str) -> Blob:
    left, right, top, bottom = _boundary(x, padding, what)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"constant_value must be a number, got {value!r}")
    value = value if x.dtype.kind == "f" else int(value)
    attrs = {"padding_before": (0, 0, top, left), "padding_after": (0, 0, bottom, right), "constant_value": value}
    return apply("pad", [x], attrs, name=name)


def zero_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """``flow.constant_pad2d`` with zeros.

    Args:
        x: an NCHW blob.
        padding: an int for every side, or (left, right, top, bottom).
        name: the op name; default ``Zero_Pad2d_<n>``.

    Returns:
        The zero-padded blob.
    """
    return _constant_pad2d(x, padding, 0, op_name(name, "Zero_Pad2d"), "flow.zero_pad2d")


def reflection_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """An NCHW blob padded on H and W with its reflection about the edge (the edge itself is not repeated).

    Args:
        x: an NCHW blob.
        padding: an int for every side, or (left, right, top, bottom); each smaller than the side it pads.
        name: the op name; default ``Reflection_Pad2d_<n>``.

    Returns:
        A blob of shape (N, C, H + top + bottom, W + left + right).
    """
    attrs = {"mode": "reflect", "padding": _boundary(x, padding, "flow.reflection_pad2d")}
    return apply("pad2d", [x], attrs, name=op_name(name, "Reflection_Pad2d"))


def replication_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """An NCHW blob padded on H and W by repeating its edge rows and columns.

    Args:
        x: an NCHW blob.
        padding: an int for every side, or (left, right, top, bottom); each smaller than the side it pads.
        name: the op name; default ``Replication_Pad2d_<n>``.

    Returns:
        A blob of shape (N, C, H + top + bottom, W + left + right).
    """
    attrs = {"mode": "replicate", "padding": _boundary(x, padding, "flow.replication_pad2d")}
    return apply("pad2d", [x], attrs, name=op_name(name, "Replication_Pad2d"))


def same_padding(x: Blob, padding: str, data_format: str, kernel_size: Sequence[int], strides: Sequence[int],
                 dilation_rate: Sequence[int], name: str | None = None) -> Blob:
    """``x`` zero-padded on its spatial axes so a window of ``kernel_size`` with ``strides`` and
    ``dilation_rate`` gives ceil(size / stride) outputs.

    Args:
        x: a blob (N, C, spatial...) or (N, spatial..., C).
        padding: "SAME_UPPER" (an odd total's extra element after) or "SAME_LOWER" (before).
        data_format: channels first when it starts with "NC", else channels last.
        kernel_size: one size per spatial axis.
        strides: one stride per spatial axis.
        dilation_rate: one dilation per spatial axis.
        name: the op name; default ``SamePadding_<n>``.

    Returns:
        The padded blob; its gradient is a crop.
    """
    what = "flow.same_padding"
    if not isinstance(padding, str) or padding.upper() not in ("SAME_LOWER", "SAME_UPPER"):
        raise build_error(what, f"padding must be 'SAME_LOWER' or 'SAME_UPPER', got {padding!r}")
    if not isinstance(data_format, str):
        raise build_error(what, f"data_format must be a string such as 'NCHW' or 'NHWC', got {data_format!r}")
    spatial = len(x.shape) - 2
    for arg, value in (("kernel_size", kernel_size), ("strides", strides), ("dilation_rate", dilation_rate)):
        if not isinstance(value, (list, tuple)) or len(value) != spatial or not all(
                is_int(v) and v >= 1 for v in value):
            raise build_error(what, f"{arg} must be a list or tuple of {spatial} ints >= 1 for shape {x.shape}, "
                                    f"got {value!r}")
    first = 2 if data_format.startswith("NC") else 1
    before, after = [0] * len(x.shape), [0] * len(x.shape)
    for i in builtins.range(spatial):
        size, k, s, d = x.shape[first + i], kernel_size[i], strides[i], dilation_rate[i]
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        before[first + i], after[first + i] = (large, small) if padding.upper() == "SAME_LOWER" else (small, large)
    attrs = {"padding_before": tuple(before), "padding_after": tuple(after), "constant_value": 0}
    return apply("pad", [x], attrs, name=op_name(name, "SamePadding"))
