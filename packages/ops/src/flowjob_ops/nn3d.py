"""``flow.nn.conv3d``, ``max_pool3d`` and ``avg_pool3d`` with legacy v0.4's arguments (``flowjob_ops.nn``
re-exports them), on the ``conv3d`` / ``max_pool3d`` / ``avg_pool3d`` records of ``defs.conv3d``.

Legacy readings kept:

* "SAME" is "SAME_LOWER" (legacy rewrote it before the op saw it: an odd total's extra element
  goes before), "SAME_UPPER" is TensorFlow's;
* ``nn.conv3d`` with NDHWC transposed input and filters to NCDHW before reading the padding, so its
  5 explicit (before, after) entries are in NCDHW order (N, C, D, H, W) even for NDHWC; the pools
  read theirs in ``data_format`` order;
* ``max_pool3d`` / ``avg_pool3d`` take ``ceil_mode`` before ``name``, as legacy v0.4 did.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name
from flowjob_ops.kernels import window3d

__all__ = ["avg_pool3d", "conv3d", "max_pool3d"]

IntOrTriple = int | Sequence[int]
_MODES = ("SAME", "SAME_LOWER", "SAME_UPPER", "VALID")


def _format(what: str, data_format: Any) -> str:
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in window3d.FORMATS_3D:
        raise build_error(what, f"data_format must be 'NCDHW' or 'NDHWC', got {data_format!r}")
    return fmt


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _triple(what: str, arg: str, value: Any, fmt: str, per_axis: bool) -> tuple[int, int, int]:
    """An int or 3 positive ints; with ``per_axis`` also 1 int or 5 per-axis entries whose batch and channel
    entries are 1 (the pools' legacy forms)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if per_axis and len(items) == 5:
        spatial = (1, 2, 3) if fmt == "NDHWC" else (2, 3, 4)
        if any(items[i] != 1 for i in range(5) if i not in spatial):
            raise build_error(what, f"{arg} {tuple(items)}: the batch and channel entries must be 1 for {fmt}")
        items = [items[i] for i in spatial]
    if len(items) == 1 and (per_axis or not isinstance(value, (list, tuple))):
        items = items * 3
    if len(items) != 3 or not all(_is_int(v) and v >= 1 for v in items):
        forms = "an int, or a list of 1, 3 or 5 (per-axis) ints" if per_axis else "an int or a list of 3 ints"
        raise build_error(what, f"{arg} must be positive: {forms}, got {value!r}")
    return (int(items[0]), int(items[1]), int(items[2]))


def _pair(what: str, entry: Any) -> tuple[int, int]:
    pair = (entry, entry) if _is_int(entry) else tuple(entry) if isinstance(entry, (list, tuple)) else ()
    if len(pair) != 2 or not all(_is_int(p) and p >= 0 for p in pair):
        raise build_error(what, f"padding entries must be non-negative ints or (before, after) pairs, got {entry!r}")
    return (int(pair[0]), int(pair[1]))


def _padding(what: str, padding: Any, order: str) -> Any:
    """The op's padding: a mode, or the 3 spatial (before, after) pairs of 5 entries given in ``order``
    (3 spatial entries are taken as they are)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in _MODES:
            raise build_error(what, f"padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID' or 5 (before, "
                                    f"after) pairs in {order} order, got {padding!r}")
        return "SAME_LOWER" if mode == "SAME" else mode
    if not isinstance(padding, (list, tuple)) or len(padding) not in (3, 5):
        raise build_error(what, f"padding must be a string or 5 (before, after) pairs in {order} order, got "
                                f"{padding!r}")
    pairs = [_pair(what, entry) for entry in padding]
    if len(pairs) == 3:
        return tuple(pairs)
    spatial = (1, 2, 3) if order == "NDHWC" else (2, 3, 4)
    if any(pairs[i] != (0, 0) for i in range(5) if i not in spatial):
        raise build_error(what, f"padding {padding!r} is read in {order} order: only D, H and W may be padded "
                                f"(the N and C entries must be 0)")
    return tuple(pairs[i] for i in spatial)


def _blob(what: str, arg: str, x: Any, fmt: str) -> None:
    if not isinstance(x, Blob):
        raise build_error(what, f"{arg} must be a blob, got {type(x).__name__}")
    if len(x.shape) != 5:
        raise build_error(what, f"{arg} must be 5-d ({fmt}), got shape {x.shape}")


def conv3d(input: Blob, filters: Blob, strides: IntOrTriple, padding: Any,  # noqa: A002
           data_format: str = "NCDHW", dilations: IntOrTriple | None = None, groups: int = 1,
           name: str | None = None) -> Blob:
    """3-D convolution (cross-correlation).

    Args:
        input: a 5-d floating blob, (N, C, D, H, W) for NCDHW or (N, D, H, W, C) for NDHWC.
        filters: the weight, (F, C/groups, kd, kh, kw) for NCDHW or (F, kd, kh, kw, C/groups) for NDHWC.
        strides: an int or a list of 3.
        padding: "SAME" (= "SAME_LOWER", legacy: an odd total's extra element before), "SAME_LOWER",
            "SAME_UPPER", "VALID", or 5 (before, after) entries (ints or pairs) in NCDHW order, also for
            NDHWC (legacy transposed to NCDHW first); 3 spatial pairs are taken as they are.
        data_format: "NCDHW" or "NDHWC".
        dilations: an int or a list of 3; default 1.
        groups: the number of channel groups; divides C and F.
        name: the op name; default ``Conv3d_<n>``.

    Returns:
        The output blob, (N, F, OD, OH, OW) or (N, OD, OH, OW, F).
    """
    what = "flow.nn.conv3d"
    fmt = _format(what, data_format)
    _blob(what, "input", input, fmt)
    _blob(what, "filters", filters, fmt)
    if not _is_int(groups) or groups < 1:
        raise build_error(what, f"groups must be a positive int, got {groups!r}")
    attrs = {"strides": _triple(what, "strides", strides, fmt, False),
             "padding": _padding(what, padding, "NCDHW"), "data_format": fmt,
             "dilations": (1, 1, 1) if dilations is None else _triple(what, "dilations", dilations, fmt, False),
             "groups": int(groups)}
    return apply("conv3d", [input, filters], attrs, name=op_name(name, "Conv3d"))


def _ceil_pads(what: str, x: Blob, ksize: tuple[int, ...], strides: tuple[int, ...], padding: Any,
               fmt: str) -> Any:
    """Explicit pads that round the output size up (legacy ``ceil_mode``), as the 2-D pools do: the last
    window must still start inside the input or its leading pad."""
    last = fmt == "NDHWC"
    spatial = x.shape[1:4] if last else x.shape[2:5]
    try:
        window = window3d.WindowNd.create(spatial, ksize, strides, 1, padding, last, fmt)
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    grown = []
    for size, k, s, (before, after) in zip(spatial, ksize, strides, window.pads):
        out = math.ceil((size + before + after - k) / s) + 1
        if (out - 1) * s >= size + before:
            out -= 1
        grown.append((before, max(after, (out - 1) * s + k - size - before)))
    return tuple(grown)


def _pool3d(op: str, prefix: str, input: Blob, ksize: Any, strides: Any, padding: Any,  # noqa: A002
            data_format: str, ceil_mode: bool, name: str | None) -> Blob:
    what = f"flow.nn.{op}"
    fmt = _format(what, data_format)
    _blob(what, "input", input, fmt)
    k = _triple(what, "ksize", ksize, fmt, True)
    s = _triple(what, "strides", strides, fmt, True)
    pad = _padding(what, padding, fmt)
    if not isinstance(ceil_mode, bool):
        raise build_error(what, f"ceil_mode must be a bool, got {ceil_mode!r}")
    if ceil_mode:
        pad = _ceil_pads(what, input, k, s, pad, fmt)
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
