"""The one implementation of the public convolution and pooling functions of every rank (``pool_nodes``,
``conv_nodes``), shared by ``conv``, ``pool`` and ``layers``, and the legacy argument forms each rank's
functions read (``POOL_READERS``): the 2-D functions' per-axis forms, passed on for the op to check; the
1-D functions', which run the 2-D records on a height of 1 (nodes ``<P>_reshape_in``, ``P``,
``<P>_reshape_out``, as before); the 3-D functions' forms; and ceil mode (``ceil_pads``) for any rank.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.kernels import window2d as pads
from flowjob_ops.kernels import window


IntOrPair = int | Sequence[int]


IntOrTriple = int | Sequence[int]


# 2-d ------------------------------------------------------------------------------------------
def spatial(value: Any, data_format: str, what: str) -> Any:
    """Legacy 4-entry ksize/strides/dilations (one per axis of data_format) to their (h, w) pair."""
    if isinstance(value, (list, tuple)) and len(value) == 4:
        try:
            fmt = pads.check_data_format(data_format)
        except ValueError as exc:
            raise build_error("flow.nn", str(exc)) from None
        ah, aw = pads.SPATIAL_AXES[fmt]
        others = [value[i] for i in range(4) if i not in (ah, aw)]
        if any(v != 1 for v in others):
            raise build_error("flow.nn", f"{what} {tuple(value)}: the batch and channel entries must be 1 for {fmt}")
        return (value[ah], value[aw])
    return value


# 1-d: the 2-d records on a height of 1 ------------------------------------------------------------
# (N, C, W) -> (N, C, 1, W) for NCW and (N, W, C) -> (N, 1, W, C) for NWC, so the 1-d functions' gradients
# are the 2-d ones through the reshapes


FORMATS_1D = {"NCW": "NCHW", "NWC": "NHWC"}


def format_1d(what: str, data_format: Any) -> str:
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in FORMATS_1D:
        raise build_error(what, f"data_format must be 'NCW' or 'NWC', got {data_format!r}")
    return fmt


def one_int(what: str, arg: str, value: Any, fmt: str) -> int:
    """An int, a 1-list, or (pool functions) 3 per-axis entries whose batch and channel entries are 1."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(items) == 3:
        w_axis = fmt.index("W")
        if any(items[i] != 1 for i in range(3) if i != w_axis):
            raise build_error(what, f"{arg} {tuple(items)}: the batch and channel entries must be 1 for {fmt}")
        items = [items[w_axis]]
    if len(items) != 1 or isinstance(items[0], bool) or not isinstance(items[0], int) or items[0] < 1:
        raise build_error(what, f"{arg} must be a positive int or a list of one, got {value!r}")
    return items[0]


def padding_1d(what: str, padding: Any, fmt: str) -> Any:
    """The 2-d padding of a 1-d one. Legacy conv1d and pooling read "SAME" as "SAME_LOWER" (the
    odd pixel before); explicit pads are 3 entries (int or (before, after)) in ``fmt`` order."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "SAME_LOWER", "SAME_UPPER", "VALID"):
            raise build_error(what, f"padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID' or 3 "
                                    f"(before, after) pairs, got {padding!r}")
        return "SAME_LOWER" if mode == "SAME" else mode
    if not isinstance(padding, (list, tuple)) or len(padding) != 3:
        raise build_error(what, f"padding must be a string or 3 (before, after) pairs in {fmt} order, got "
                                f"{padding!r}")
    pairs = []
    for entry in padding:
        pair = (entry, entry) if isinstance(entry, int) else tuple(entry) if isinstance(entry, (list, tuple)) else ()
        if len(pair) != 2 or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pair):
            raise build_error(what, f"padding entries must be ints or (before, after) pairs, got {entry!r}")
        pairs.append(pair)
    w_axis = fmt.index("W")
    if any(pairs[i] != (0, 0) for i in range(3) if i != w_axis):
        raise build_error(what, f"padding {padding!r}: only the W dimension may be padded for {fmt}")
    return ((0, 0), pairs[w_axis])


def to_2d(what: str, x: Any, arg: str, fmt: str, name: str) -> Blob:
    """A 3-d blob in ``fmt`` with a height axis of 1 inserted (input or filter)."""
    if not isinstance(x, Blob):
        raise build_error(what, f"{arg} must be a blob, got {type(x).__name__}")
    if len(x.shape) != 3:
        raise build_error(what, f"{arg} must be 3-d ({fmt}), got shape {x.shape}")
    a, b, c = x.shape
    shape = (a, b, 1, c) if fmt == "NCW" else (a, 1, b, c)
    return apply("reshape", [x], {"shape": shape}, name=name)


def from_2d(y: Blob, fmt: str, name: str) -> Blob:
    n, a, b, c = y.shape
    return apply("reshape", [y], {"shape": (n, a, c) if fmt == "NCW" else (n, b, c)}, name=name)


# 3-d ------------------------------------------------------------------------------------------
MODES_3D = ("SAME", "SAME_LOWER", "SAME_UPPER", "VALID")


def format_3d(what: str, data_format: Any) -> str:
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in window.FORMATS[3]:
        raise build_error(what, f"data_format must be 'NCDHW' or 'NDHWC', got {data_format!r}")
    return fmt


is_int = window.is_int


def triple(what: str, arg: str, value: Any, fmt: str, per_axis: bool) -> tuple[int, int, int]:
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
    if len(items) != 3 or not all(is_int(v) and v >= 1 for v in items):
        forms = "an int, or a list of 1, 3 or 5 (per-axis) ints" if per_axis else "an int or a list of 3 ints"
        raise build_error(what, f"{arg} must be positive: {forms}, got {value!r}")
    return (int(items[0]), int(items[1]), int(items[2]))


def pad_pair(what: str, entry: Any) -> tuple[int, int]:
    pair = (entry, entry) if is_int(entry) else tuple(entry) if isinstance(entry, (list, tuple)) else ()
    if len(pair) != 2 or not all(is_int(p) and p >= 0 for p in pair):
        raise build_error(what, f"padding entries must be non-negative ints or (before, after) pairs, got {entry!r}")
    return (int(pair[0]), int(pair[1]))


def padding_3d(what: str, padding: Any, order: str) -> Any:
    """The op's padding: a mode, or the 3 spatial (before, after) pairs of 5 entries given in ``order``
    (3 spatial entries are taken as they are)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in MODES_3D:
            raise build_error(what, f"padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID' or 5 (before, "
                                    f"after) pairs in {order} order, got {padding!r}")
        return "SAME_LOWER" if mode == "SAME" else mode
    if not isinstance(padding, (list, tuple)) or len(padding) not in (3, 5):
        raise build_error(what, f"padding must be a string or 5 (before, after) pairs in {order} order, got "
                                f"{padding!r}")
    pairs = [pad_pair(what, entry) for entry in padding]
    if len(pairs) == 3:
        return tuple(pairs)
    spatial = (1, 2, 3) if order == "NDHWC" else (2, 3, 4)
    if any(pairs[i] != (0, 0) for i in range(5) if i not in spatial):
        raise build_error(what, f"padding {padding!r} is read in {order} order: only D, H and W may be padded "
                                f"(the N and C entries must be 0)")
    return tuple(pairs[i] for i in spatial)


def check_5d(what: str, arg: str, x: Any, fmt: str) -> None:
    if not isinstance(x, Blob):
        raise build_error(what, f"{arg} must be a blob, got {type(x).__name__}")
    if len(x.shape) != 5:
        raise build_error(what, f"{arg} must be 5-d ({fmt}), got shape {x.shape}")


def ceil_pads(what: str, x: Blob, ksize: Any, strides: Any, padding: Any, fmt: str) -> Any:
    """Explicit pads that round the output size up (``ceil_mode``), as PyTorch and legacy v0.3 did: the last
    window must still start inside the input or its leading pad."""
    try:
        fmt = window.check_format(fmt, len(x.shape) - 2)
        spatial = [x.shape[a] for a in window.spatial_axes(fmt)]
        win = window.Window.create(spatial, ksize, strides, 1, padding, fmt)
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    grown = []
    for size, k, s, (before, after) in zip(win.in_size, win.ksize, win.strides, win.pads):
        out = math.ceil((size + before + after - k) / s) + 1
        if (out - 1) * s >= size + before:
            out -= 1
        grown.append((before, max(after, (out - 1) * s + k - size - before)))
    return tuple(grown)


def conv3d_attrs(what: str, input: Blob, filters: Blob, strides: IntOrTriple, padding: Any,  # noqa: A002
                 data_format: str, dilations: IntOrTriple | None, groups: int) -> dict[str, Any]:
    """``flow.nn.conv3d``'s arguments checked, as the ``conv3d`` op's attributes (explicit padding read in
    NCDHW order, as legacy's nn.conv3d did for both formats)."""
    fmt = format_3d(what, data_format)
    check_5d(what, "input", input, fmt)
    check_5d(what, "filters", filters, fmt)
    if not is_int(groups) or groups < 1:
        raise build_error(what, f"groups must be a positive int, got {groups!r}")
    return {"strides": triple(what, "strides", strides, fmt, False),
            "padding": padding_3d(what, padding, "NCDHW"), "data_format": fmt,
            "dilations": (1, 1, 1) if dilations is None else triple(what, "dilations", dilations, fmt, False),
            "groups": int(groups)}


# the public functions of every rank ----------------------------------------------------------------
class PoolArgs(NamedTuple):
    """A pooling's arguments read in its rank's legacy forms."""

    data_format: str
    ksize: Any
    strides: Any
    padding: Any


def _pool_args_1d(what: str, x: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
                  ceil_mode: Any) -> PoolArgs:
    fmt = format_1d(what, data_format)
    k, s = one_int(what, "ksize", ksize, fmt), one_int(what, "strides", strides, fmt)
    return PoolArgs(fmt, k, s, padding_1d(what, padding, fmt))


def _pool_args_2d(what: str, x: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
                  ceil_mode: Any) -> PoolArgs:
    # passed on as given: the op checks them, naming itself
    return PoolArgs(data_format, spatial(ksize, data_format, "ksize"), spatial(strides, data_format, "strides"),
                    padding)


def _pool_args_3d(what: str, x: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
                  ceil_mode: Any) -> PoolArgs:
    fmt = format_3d(what, data_format)
    check_5d(what, "input", x, fmt)
    k = triple(what, "ksize", ksize, fmt, True)
    s = triple(what, "strides", strides, fmt, True)
    pad = padding_3d(what, padding, fmt)
    if not isinstance(ceil_mode, bool):
        raise build_error(what, f"ceil_mode must be a bool, got {ceil_mode!r}")
    return PoolArgs(fmt, k, s, pad)


POOL_READERS = {1: _pool_args_1d, 2: _pool_args_2d, 3: _pool_args_3d}
"""rank -> the reader of its public pooling functions' legacy argument forms."""


def pool_nodes(kind: str, rank: int, input: Blob, ksize: Any, strides: Any, padding: Any,  # noqa: A002
               data_format: str, ceil_mode: bool, name: str | None) -> Blob:
    """``flow.nn.<kind>_pool<rank>d``: the op ``<kind>_pool<rank>d`` named ``name`` (default
    ``<Kind>Pool<rank>D_<n>``); 1-D runs the 2-D op on a height of 1 (see ``lifted_1d``)."""
    what = f"flow.nn.{kind}_pool{rank}d"
    args = POOL_READERS[rank](what, input, ksize, strides, padding, data_format, ceil_mode)
    pad = args.padding
    if ceil_mode and isinstance(input, Blob) and len(input.shape) == rank + 2:
        pad = ceil_pads(what, input, args.ksize, args.strides, pad, args.data_format)
    attrs = {"ksize": args.ksize, "strides": args.strides, "padding": pad, "data_format": args.data_format}
    if rank == 2:  # the op's own prefix, from the op record
        return apply(f"{kind}_pool2d", [input], attrs, name=name)
    node = op_name(name, f"{kind.capitalize()}Pool{rank}D")
    if rank == 1:
        return lifted_1d(what, f"{kind}_pool2d", [input], attrs, node)
    return apply(f"{kind}_pool{rank}d", [input], attrs, name=node)


def lifted_1d(what: str, op: str, inputs: Sequence[Any], attrs: dict[str, Any], node: str) -> Blob:
    """A 1-D window op as its 2-D op on a height of 1: ``<node>_reshape_in`` (and ``<node>_reshape_weight``
    for a second input), the op ``node`` with 1-D ``attrs`` given a height of 1, ``<node>_reshape_out``."""
    fmt = attrs["data_format"]
    lifted = [to_2d(what, inputs[0], "input", fmt, f"{node}_reshape_in")]
    if len(inputs) > 1:
        lifted.append(to_2d(what, inputs[1], "filters", fmt, f"{node}_reshape_weight"))
    attrs2d = dict(attrs, data_format=FORMATS_1D[fmt])
    for key in ("ksize", "strides", "dilations"):
        if key in attrs2d:
            attrs2d[key] = (1, attrs2d[key])
    return from_2d(apply(op, lifted, attrs2d, name=node), fmt, f"{node}_reshape_out")


def conv_nodes(rank: int, input: Blob, filters: Blob, strides: Any, padding: Any, data_format: str,  # noqa: A002
               dilations: Any, groups: int, name: str | None) -> Blob:
    """``flow.nn.conv<rank>d`` (and the convolution of ``flow.layers.conv<rank>d``): the op ``conv<rank>d``
    named ``name`` (default ``Conv2D_<n>``, ``Conv1d_<n>``, ``Conv3d_<n>`` as legacy); 1-D runs the 2-D op on
    a height of 1 (see ``lifted_1d``)."""
    what = f"flow.nn.conv{rank}d"
    if rank == 2:  # passed on as given: the op checks them, naming itself
        attrs = {"strides": spatial(strides, data_format, "strides"), "padding": padding,
                 "data_format": data_format,
                 "dilations": None if dilations is None else spatial(dilations, data_format, "dilations"),
                 "groups": groups}
        return apply("conv2d", [input, filters], attrs, name=name)
    if rank == 1:
        node = op_name(name, "Conv1d")
        fmt = format_1d(what, data_format)
        stride = one_int(what, "strides", strides, fmt)
        dilation = 1 if dilations is None else one_int(what, "dilations", dilations, fmt)
        attrs = {"strides": stride, "padding": padding_1d(what, padding, fmt), "data_format": fmt,
                 "dilations": dilation, "groups": groups}
        return lifted_1d(what, "conv2d", [input, filters], attrs, node)
    attrs = conv3d_attrs(what, input, filters, strides, padding, data_format, dilations, groups)
    return apply("conv3d", [input, filters], attrs, name=op_name(name, "Conv3d"))
