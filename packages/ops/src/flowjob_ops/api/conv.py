"""``flow.nn``'s convolutions: conv1d (conv2d over a height of 1), conv2d and conv3d (thin calls of the one
implementation, ``_windows.conv_nodes``), the transposed convolutions (conv2d_transpose, PyTorch-style
torch_conv2d_transpose) and TensorFlow-style compat_conv2d.

Legacy readings kept: "SAME" is "SAME_LOWER" for conv1d and conv3d (an odd total's extra element goes
before); conv3d with NDHWC transposed input and filters to NCDHW before reading the padding, so its
5 explicit (before, after) entries are in NCDHW order (N, C, D, H, W) even for NDHWC.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error
from flowjob_ops.api._windows import IntOrPair, IntOrTriple, conv_nodes, spatial
from flowjob_ops.kernels import window2d as pads


__all__ = ["compat_conv2d", "conv1d", "conv2d", "conv2d_transpose", "conv3d", "torch_conv2d_transpose"]


def conv1d(input: Blob, filters: Blob, strides: int | Sequence[int], padding: Any,  # noqa: A002
           data_format: str = "NCW", dilations: int | Sequence[int] | None = None, groups: int = 1,
           name: str | None = None) -> Blob:
    """1-D convolution: ``conv2d`` over a height of 1.

    Nodes: ``<P>_reshape_in`` and ``<P>_reshape_weight`` (a height axis of 1), the ``conv2d``
    node ``P`` and ``<P>_reshape_out``; P is ``name`` or ``Conv1d_<n>``.

    Args:
        input: a 3-d floating blob, (N, C, W) for NCW or (N, W, C) for NWC.
        filters: the weight, (F, C/groups, k) for NCW or (F, k, C/groups) for NWC.
        strides: an int or a list of one.
        padding: "SAME" (= "SAME_LOWER" as legacy: the odd pixel before), "SAME_LOWER",
            "SAME_UPPER", "VALID", or 3 entries (int or (before, after)) in data_format order.
        data_format: "NCW" or "NWC".
        dilations: an int or a list of one; default 1.
        groups: the number of channel groups.
        name: the prefix P.

    Returns:
        The output blob, (N, F, OW) or (N, OW, F).
    """
    return conv_nodes(1, input, filters, strides, padding, data_format, dilations, groups, name)


def conv2d(input: Blob, filters: Blob, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
           dilations: IntOrPair | None = None, groups: int = 1, name: str | None = None) -> Blob:
    """2-D convolution (cross-correlation, as in every framework).

    Args:
        input: a 4-d floating blob, (N, C, H, W) or (N, H, W, C).
        filters: the weight, (F, C/groups, kh, kw) for NCHW or (F, kh, kw, C/groups) for NHWC.
        strides: an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        dilations: an int, (h, w) or 4 per-axis entries; default 1.
        groups: the number of channel groups.
        name: the op name; default ``Conv2D_<n>``.

    Returns:
        The output blob, (N, F, OH, OW) or (N, OH, OW, F).
    """
    return conv_nodes(2, input, filters, strides, padding, data_format, dilations, groups, name)


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
    return conv_nodes(3, input, filters, strides, padding, data_format, dilations, groups, name)


def conv2d_transpose(value: Blob | None = None, filter: Blob | None = None,  # noqa: A002
                     output_shape: Sequence[int] | None = None, strides: IntOrPair | None = None,
                     padding: str = "VALID", data_format: str = "NCHW", name: str | None = None,
                     input: Blob | None = None, filters: Blob | None = None,  # noqa: A002
                     dilations: IntOrPair | None = None) -> Blob:
    """2-D transposed convolution (op ``deconv2d``): the data gradient of the convolution that
    maps ``output_shape`` to value's shape.

    Args:
        value: a 4-d floating blob (N, F, H, W) or (N, H, W, F); ``input`` is its alias (give one).
        filter: the weight, (F, C, kh, kw) for NCHW or (F, kh, kw, C) for NHWC, C being the output
            channels; ``filters`` is its alias (give one).
        output_shape: the output's 4 dimensions in data_format order (batch and channels must
            match value and filter).
        strides: an int, (h, w) or 4 per-axis entries (required).
        padding: "VALID" (output rows no window reaches are 0) or "SAME" (needs
            ceil(output / stride) == value's size; the odd padding pixel goes after).
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``Deconv2d_<n>``.
        input: alias of value.
        filters: alias of filter.
        dilations: an int, (h, w) or 4 per-axis entries; default 1.

    Returns:
        A blob of output_shape.
    """
    what = "flow.nn.conv2d_transpose"
    if (value is None) == (input is None):
        raise build_error(what, "give exactly one of value and input")
    if (filter is None) == (filters is None):
        raise build_error(what, "give exactly one of filter and filters")
    x = value if value is not None else input
    w = filter if filter is not None else filters
    if not isinstance(x, Blob) or not isinstance(w, Blob):
        raise build_error(what, "value and filter must be blobs")
    if data_format not in ("NCHW", "NHWC"):
        raise build_error(what, f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise build_error(what, f"value and filter must be 4-d, got shapes {x.shape} and {w.shape}")
    if not isinstance(output_shape, (list, tuple)) or len(output_shape) != 4:
        raise build_error(what, f"output_shape must be 4 dimensions in {data_format} order, got {output_shape!r}")
    out = tuple(int(d) for d in output_shape)
    channels_axis = 1 if data_format == "NCHW" else 3
    if out[0] != x.shape[0]:
        raise build_error(what, f"output_shape {out}: batch must be value's ({x.shape[0]})")
    if out[channels_axis] != w.shape[channels_axis]:
        # v0.2 took the channels from the filter and ignored this entry (v0.3.1+ asserted); programs of
        # that time still in the v0.4 benchmark (DCGAN's layers.py passes value's channels) keep running
        warnings.warn(f"{what}: output_shape {out} gives {out[channels_axis]} channels, the filter has "
                      f"{w.shape[channels_axis]}; the filter's are used, as legacy v0.2 did", stacklevel=2)
        out = out[:channels_axis] + (int(w.shape[channels_axis]),) + out[channels_axis + 1:]
    if strides is None:
        raise build_error(what, "strides must be an int or a list")
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise build_error(what, f"padding must be 'SAME' or 'VALID', got {padding!r}")
    # legacy's SAME transposed convolution crops padding_needed // 2 before: SAME_UPPER
    attrs = {"strides": spatial(strides, data_format, "strides"),
             "padding": "VALID" if padding.upper() == "VALID" else "SAME_UPPER", "data_format": data_format,
             "dilations": None if dilations is None else spatial(dilations, data_format, "dilations"),
             "groups": 1, "x_shape": out}
    return apply("deconv2d", [x, w], attrs, name=name)


def compat_conv2d(input: Blob, filters: Blob, strides: IntOrPair, padding: Any,  # noqa: A002
                  data_format: str = "NCHW", dilations: IntOrPair | None = None, groups: int = 1,
                  name: str | None = None) -> Blob:
    """``conv2d`` with TensorFlow's reading of "SAME": the odd padding pixel after ("SAME_UPPER").

    Args:
        input: a 4-d floating blob, (N, C, H, W) or (N, H, W, C).
        filters: the weight, (F, C/groups, kh, kw) for NCHW or (F, kh, kw, C/groups) for NHWC.
        strides: an int, (h, w) or 4 per-axis entries.
        padding: "SAME" or "VALID" (other conv2d paddings pass through).
        data_format: "NCHW" or "NHWC".
        dilations: an int, (h, w) or 4 per-axis entries; default 1.
        groups: the number of channel groups.
        name: the op name; default ``Conv2D_<n>``.

    Returns:
        The output blob.
    """
    if isinstance(padding, str) and padding.upper() == "SAME":
        padding = "SAME_UPPER"
    return conv2d(input, filters, strides, padding, data_format, dilations, groups, name)


def _int_pair(what: str, arg: str, value: Any) -> tuple[int, int]:
    """An int or two ints, each may be 0 (pads)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise build_error(what, f"{arg} must be an int or two ints (h, w), got {value!r}")
    return items[0], items[1]


def torch_conv2d_transpose(value: Blob | None = None, filter: Blob | None = None,  # noqa: A002
                           output_padding: IntOrPair | None = None, strides: IntOrPair | None = None,
                           padding_needed: Sequence[int] | None = None, data_format: str = "NCHW",
                           name: str | None = None, input: Blob | None = None,  # noqa: A002
                           filters: Blob | None = None, dilations: IntOrPair | None = None) -> Blob:
    """PyTorch-style 2-D transposed convolution (op ``deconv2d``): the output size is
    ``(in - 1) * stride + dilation * (k - 1) + 1 - padding_needed + output_padding`` per axis, the
    padding split evenly, and the output_padding rows still take the windows that reach them.

    Args:
        value: a 4-d floating blob; ``input`` is its alias (give one).
        filter: the weight, (F, C, kh, kw) for NCHW or (F, kh, kw, C) for NHWC; ``filters`` is its alias.
        output_padding: an int or (h, w), each below its stride; default 0.
        strides: an int or (h, w) (required).
        padding_needed: the total padding (h, w), each even (torch's 2 * padding).
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``Deconv2d_<n>``.
        input: alias of value.
        filters: alias of filter.
        dilations: an int or (h, w); default 1.

    Returns:
        The output blob.
    """
    what = "flow.nn.torch_conv2d_transpose"
    if (value is None) == (input is None) or (filter is None) == (filters is None):
        raise build_error(what, "give exactly one of value and input, and one of filter and filters")
    x = value if value is not None else input
    w = filter if filter is not None else filters
    if not isinstance(x, Blob) or not isinstance(w, Blob) or len(x.shape) != 4 or len(w.shape) != 4:
        raise build_error(what, "value and filter must be 4-d blobs")
    if data_format not in ("NCHW", "NHWC"):
        raise build_error(what, f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    try:
        stride = pads.normalize_pair(strides, "strides")
        dilation = pads.normalize_pair(1 if dilations is None else dilations, "dilations")
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    extra, needed = _int_pair(what, "output_padding", output_padding or 0), _int_pair(what, "padding_needed",
                                                                                        padding_needed)
    if any(p < 0 or p % 2 for p in needed):
        raise build_error(what, f"padding_needed must be even and >= 0 per axis, got {tuple(padding_needed)}")
    if any(not 0 <= e < s for e, s in zip(extra, stride)):
        raise build_error(what, f"output_padding {extra} must be >= 0 and below the strides {stride}")
    ah, aw = pads.SPATIAL_AXES[data_format]
    kernel = (w.shape[2], w.shape[3]) if data_format == "NCHW" else (w.shape[1], w.shape[2])
    sizes = [(x.shape[a] - 1) * s + (k - 1) * d + 1 - p + e
             for a, s, k, d, p, e in zip((ah, aw), stride, kernel, dilation, needed, extra)]
    out = [x.shape[0], 0, 0, 0]
    out[1 if data_format == "NCHW" else 3] = w.shape[1 if data_format == "NCHW" else 3]
    out[ah], out[aw] = sizes
    attrs = {"strides": stride, "padding": tuple((p // 2, p // 2) for p in needed), "data_format": data_format,
             "dilations": dilation, "groups": 1, "x_shape": tuple(out)}
    return apply("deconv2d", [x, w], attrs, name=name)
