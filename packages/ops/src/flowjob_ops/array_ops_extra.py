"""Legacy top-level array functions beyond array_ops / array_ops_more: strided slices and slice
updates, zeros / ones / range, expand, diag, masked_fill, dim_gather, reshape_like, elem_cnt,
broadcast_to_compatible_with, the 2-d paddings, same_padding, dynamic_reshape and assign; argwhere,
nonzero and sync_dynamic_resize, whose row count the data decide (``records/data_dependent.py``).
``flowjob_ops.array_ops`` re-exports every name here (its ``__all__`` feeds ``flow.*``).

Node names follow legacy's (``Constant_Pad2d_<n>``, ``Zeros_<n>constant``, ``range``), so
programs that watch or look up nodes by name find them.
"""
from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import Blob, apply, dtypes, maybe_builder

from flowjob_ops.records.indexing import strided_bounds
from flowjob_ops.records.common import build_error, op_name

__all__ = [
    "assign", "broadcast_to_compatible_with", "constant_pad2d", "diag", "dim_gather", "dynamic_reshape", "elem_cnt",
    "expand", "masked_fill", "ones", "range", "reflection_pad2d", "replication_pad2d", "reshape_like", "same_padding",
    "slice_update", "slice_v2", "zero_pad2d", "zeros",
    "argwhere", "nonzero", "sync_dynamic_resize",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# strided slices ---------------------------------------------------------------------------
def _slice_attrs(x: Blob, slice_tup_list: Any, what: str) -> dict[str, tuple[int | None, ...]]:
    """(start, stop, step) per axis; a short list leaves the trailing axes whole (legacy)."""
    rank = len(x.shape)
    if not isinstance(slice_tup_list, (list, tuple)) or len(slice_tup_list) > rank:
        raise build_error(what, f"slice_tup_list must be a list or tuple of at most {rank} (start, stop, step) "
                                f"entries for shape {x.shape}, got {slice_tup_list!r}")
    items = list(slice_tup_list) + [(None, None, None)] * (rank - len(slice_tup_list))
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 3 or any(
                v is not None and not _is_int(v) for v in item):
            raise build_error(what, f"each entry of slice_tup_list must be (start, stop, step) of ints or None, "
                                    f"got {item!r}")
    attrs = {"start": tuple(i[0] for i in items), "stop": tuple(i[1] for i in items),
             "step": tuple(i[2] for i in items)}
    try:
        strided_bounds(x.shape, attrs["start"], attrs["stop"], attrs["step"])
    except ValueError as exc:  # ShapeError: named here, before a node exists
        raise build_error(what, str(exc)) from None
    return attrs


def slice_v2(x: Blob, slice_tup_list: Sequence[Sequence[int | None]], name: str | None = None) -> Blob:
    """``x[start:stop:step]`` on every axis.

    Args:
        x: a blob.
        slice_tup_list: one ``(start, stop, step)`` per leading axis (None: open; step may be
            negative); missing trailing axes are kept whole. start lies in [-size, size), stop
            in [-size-1, size].
        name: the op name; default ``Slice_<n>``.

    Returns:
        The selected elements as a new blob.
    """
    return apply("slice_v2", [x], _slice_attrs(x, slice_tup_list, "flow.slice_v2"), name=name)


def slice_update(x: Blob, update: Blob, slice_tup_list: Sequence[Sequence[int | None]],
                 name: str | None = None) -> Blob:
    """A copy of ``x`` whose slice ``x[start:stop:step]`` holds ``update`` (x itself is unchanged).

    Args:
        x: a blob.
        update: a blob of x's dtype shaped like the slice.
        slice_tup_list: as for ``flow.slice_v2``.
        name: the op name; default ``SliceUpdate_<n>``.

    Returns:
        A blob of x's shape; gradients reach x outside the slice and update inside it.
    """
    return apply("slice_update", [x, update], _slice_attrs(x, slice_tup_list, "flow.slice_update"), name=name)


# fills --------------------------------------------------------------------------------------
def _fill(shape: Sequence[int], value: int, dtype: Any, name: str | None, prefix: str, what: str) -> Blob:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)) or not all(_is_int(d) and d > 0 for d in shape):
        raise build_error(what, f"shape must be a list or tuple of positive ints, got {shape!r}")
    dt = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)
    # legacy names the constant node "<name>constant": Zeros_3constant, or myzerosconstant
    return apply("constant", [], {"value": value, "dtype": dt, "shape": tuple(shape)},
                 name=f"{op_name(name, prefix)}constant")


def zeros(shape: Sequence[int], dtype: Any = None, name: str | None = None) -> Blob:
    """A blob of zeros.

    Args:
        shape: the shape.
        dtype: default ``flow.float32``.
        name: the op name prefix; the node is ``<name>constant`` (default ``Zeros_<n>constant``).

    Returns:
        A constant blob (no gradient).
    """
    return _fill(shape, 0, dtype, name, "Zeros", "flow.zeros")


def ones(shape: Sequence[int], dtype: Any = None, name: str | None = None) -> Blob:
    """A blob of ones.

    Args:
        shape: the shape.
        dtype: default ``flow.float32``.
        name: the op name prefix; the node is ``<name>constant`` (default ``Ones_<n>constant``).

    Returns:
        A constant blob (no gradient).
    """
    return _fill(shape, 1, dtype, name, "Ones", "flow.ones")


def elem_cnt(inputs: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """The number of elements of ``inputs``, as a blob of shape (1,).

    Args:
        inputs: a blob.
        dtype: default ``flow.int32``.
        name: the op name; default ``ElemCnt_<n>``.

    Returns:
        A constant blob (shapes are static here, so the count is known when the job is built).
    """
    dt = dtypes.int32 if dtype is None else dtypes.as_dtype(dtype)
    return apply("constant", [], {"value": int(np.prod(inputs.shape, dtype=np.int64)), "dtype": dt, "shape": (1,)},
                 name=op_name(name, "ElemCnt"))


# shapes ---------------------------------------------------------------------------------------
def expand(x: Blob, expand_size: Sequence[int], name: str | None = None) -> Blob:
    """``x`` broadcast to ``expand_size``; -1 keeps an axis, new axes go in front.

    Args:
        x: a blob.
        expand_size: the new shape, at least x's rank long; an entry is -1 (keep), x's size, or any
            size >= 1 where x has size 1; the new leading entries must be >= 1.
        name: the op name; default ``Expand_<n>``.

    Returns:
        The expanded blob; its gradient sums over the expanded axes.
    """
    sizes = list(expand_size)
    rank, new_rank = len(x.shape), len(sizes)
    if new_rank < rank or not all(_is_int(s) for s in sizes):
        raise build_error("flow.expand", f"expand_size {tuple(sizes)} must be ints, at least as many as the "
                                         f"axes of {x.shape}")
    lead = new_rank - rank
    target = []
    for i, s in enumerate(sizes):
        old = x.shape[i - lead] if i >= lead else None
        if old is not None and s in (-1, old):
            target.append(old)
        elif s >= 1 and old in (None, 1):
            target.append(s)
        else:
            raise build_error("flow.expand", f"expand_size {tuple(sizes)} cannot expand {x.shape}: axis {i} "
                                             f"{'is new and needs a size >= 1' if old is None else f'has size {old}'}")
    node = op_name(name, "Expand")
    if lead:
        x = apply("reshape", [x], {"shape": (1,) * lead + tuple(x.shape)}, name=f"{node}_reshape")
    return apply("broadcast_to", [x], {"shape": tuple(target)}, name=node)


def reshape_like(x: Blob, like: Blob, name: str | None = None) -> Blob:
    """``x`` reshaped to the shape of ``like`` (same element count).

    Args:
        x: a blob.
        like: the blob whose shape to take.
        name: the op name; default ``ReshapeLike_<n>``.

    Returns:
        A reshaped blob (a view).
    """
    if int(np.prod(x.shape, dtype=np.int64)) != int(np.prod(like.shape, dtype=np.int64)):
        raise build_error("flow.reshape_like", f"x {x.shape} and like {like.shape} hold different element counts")
    return apply("reshape", [x], {"shape": tuple(like.shape)}, name=op_name(name, "ReshapeLike"))


def dynamic_reshape(x: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """``x`` in a new shape (one entry may be -1). Blobs here have static shapes, so this is
    ``flow.reshape`` under legacy's node name.

    Args:
        x: a blob.
        shape: a list or tuple; one entry may be -1.
        name: the op name; default ``DynamicReshape_<n>``.

    Returns:
        A reshaped blob (a view).
    """
    if not isinstance(shape, (list, tuple)):
        raise build_error("flow.dynamic_reshape", f"shape must be a list or tuple, got {shape!r}")
    return apply("reshape", [x], {"shape": tuple(shape)}, name=op_name(name, "DynamicReshape"))


def broadcast_to_compatible_with(x: Blob, compatible: Sequence[Blob], name: str | None = None) -> Blob:
    """``x`` broadcast to the common (numpy) broadcast shape of itself and ``compatible``.

    Args:
        x: a blob.
        compatible: a list or tuple of blobs.
        name: the op name; default ``BroadcastToCompatibleWith_<n>``.

    Returns:
        A blob of the broadcast shape in x's dtype.
    """
    if not isinstance(compatible, (list, tuple)):
        raise build_error("flow.broadcast_to_compatible_with",
                          f"compatible must be a list or tuple of blobs, got {compatible!r}")
    shapes = [tuple(x.shape)] + [tuple(b.shape) for b in compatible]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise build_error("flow.broadcast_to_compatible_with", f"shapes {shapes} do not broadcast") from None
    return apply("broadcast_to", [x], {"shape": tuple(shape)}, name=op_name(name, "BroadcastToCompatibleWith"))


# indexing ---------------------------------------------------------------------------------------
def diag(input: Blob, diagonal: int = 0, name: str | None = None) -> Blob:  # noqa: A002 - legacy name
    """A vector put on a diagonal of a square matrix, or the diagonal of a matrix.

    Args:
        input: a 1-d or 2-d blob.
        diagonal: 0 the main diagonal, > 0 above it, < 0 below it.
        name: the op name; default ``Diag_<n>``.

    Returns:
        1-d input of length n: an (n + |diagonal|)-square matrix, zero off that diagonal; 2-d input:
        the diagonal's elements.
    """
    if not _is_int(diagonal):
        raise build_error("flow.diag", f"diagonal must be an int, got {diagonal!r}")
    return apply("diag", [input], {"diagonal": int(diagonal)}, name=name)


def dim_gather(input: Blob, dim: int, index: Blob, name: str | None = None) -> Blob:  # noqa: A002
    """``input`` read at ``index`` along ``dim``: ``out[i][j] = input[index[i][j]][j]`` for dim 0.

    Args:
        input: a blob.
        dim: the axis the index values address.
        index: an integer blob of input's rank, equal to input's shape except at dim.
        name: the op name; default ``DimGather_<n>``.

    Returns:
        A blob shaped like index in input's dtype; the gradient sums into input where it was read.
    """
    if len(input.shape) != len(index.shape):
        raise build_error("flow.dim_gather", f"input {input.shape} and index {index.shape} need the same rank")
    if not _is_int(dim) or not -len(index.shape) <= dim < len(index.shape):
        raise build_error("flow.dim_gather", f"dim {dim!r} is out of range for index of shape {index.shape}")
    return apply("dim_gather", [input, index], {"dim": int(dim) % len(index.shape)}, name=name)


def masked_fill(x: Blob, mask: Blob, value: float | int, name: str | None = None) -> Blob:
    """``x`` with ``value`` wherever ``mask`` is nonzero (x and mask broadcast).

    Args:
        x: a blob.
        mask: an int8, int32 or int64 blob of 0 and 1.
        value: the fill value.
        name: the op name prefix; default ``MaskedFill_<n>`` (nodes ``<name>_ConstantLike``, ``<name>_Where``).

    Returns:
        A blob of the broadcast shape; the gradient reaches x where the mask is 0.
    """
    if mask.dtype not in (dtypes.int8, dtypes.int32, dtypes.int64):
        raise build_error("flow.masked_fill", f"mask must be an int8, int32 or int64 blob, got {mask.dtype}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error("flow.masked_fill", f"value must be a number, got {value!r}")
    node = op_name(name, "MaskedFill")
    filled = apply("constant_like", [x], {"value": value, "dtype": None}, name=f"{node}_ConstantLike")
    return apply("where", [mask, filled, x], name=f"{node}_Where")


def range(start: int, limit: int | None = None, delta: int = 1, dtype: Any = None,  # noqa: A001
          name: str | None = "range") -> Blob:
    """``start, start + delta, ...`` below ``limit``, as Python's range (``range(n)`` counts from 0).

    Args:
        start: an int; the limit when ``limit`` is None.
        limit: an int > start.
        delta: an int in [1, limit - start].
        dtype: default ``flow.int64``.
        name: the op name; legacy's default is ``"range"`` (a second call in one job needs another).

    Returns:
        A constant 1-d blob of ceil((limit - start) / delta) elements.
    """
    if limit is None:
        start, limit = 0, start
    if not all(_is_int(v) for v in (start, limit, delta)):
        raise build_error("flow.range", f"start, limit and delta must be ints, got {start!r}, {limit!r}, {delta!r}")
    if limit <= start or not 0 < delta <= limit - start:
        raise build_error("flow.range", f"needs limit > start and 0 < delta <= limit - start, got start={start}, "
                                        f"limit={limit}, delta={delta}")
    attrs = {"start": int(start), "limit": int(limit), "delta": int(delta),
             "dtype": dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)}
    return apply("range", [], attrs, name=name)


# padding --------------------------------------------------------------------------------------------
def _boundary(x: Blob, padding: Any, what: str) -> tuple[int, int, int, int]:
    """(left, right, top, bottom) from an int or a 4-list, checked as legacy: NCHW, each pad below the size."""
    if len(x.shape) != 4:
        raise build_error(what, f"x must be an NCHW blob of rank 4, got shape {x.shape}")
    h, w = x.shape[2], x.shape[3]
    if _is_int(padding):
        pads = (int(padding),) * 4
    elif isinstance(padding, (list, tuple)) and len(padding) == 4 and all(_is_int(p) for p in padding):
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
                _is_int(v) and v >= 1 for v in value):
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


# assign ------------------------------------------------------------------------------------------------
def _variable_lbns() -> set[str]:
    builder = maybe_builder()
    return set() if builder is None else {v.lbn for v in builder.job.variables.values()}


def assign(ref: Blob, value: Blob, dtype: Any = None, name: str | None = None) -> None:
    """Overwrite the variable ``ref`` with ``value`` when the job runs (after every other reader of
    ref in that step; later steps and jobs see the new value).

    Args:
        ref: a variable (from ``flow.get_variable``).
        value: a blob of ref's shape and dtype.
        dtype: ignored (legacy argument).
        name: the op name; default ``Assign_<n>``.
    """
    _assign(ref, value, name, "flow.assign")


def _assign(ref: Blob, value: Blob, name: str | None, what: str) -> None:
    if not isinstance(ref, Blob) or ref.lbn not in _variable_lbns():
        raise build_error(what, f"ref must be a variable of this job (flow.get_variable), got {ref!r}")
    if not isinstance(value, Blob):
        raise build_error(what, f"value must be a blob, got {type(value).__name__}")
    apply("assign", [ref, value], name=name)


def system_assign(ref: Blob, value: Blob, validate_shape: Any = None, use_locking: Any = None,
                  name: str | None = None) -> Blob:
    """``flow.system.assign``: as ``flow.assign``, returning ``ref``.

    Args:
        ref: a variable (from ``flow.get_variable``).
        value: a blob of ref's shape and dtype.
        validate_shape: ignored (legacy argument; shapes are always checked).
        use_locking: ignored (legacy argument).
        name: the op name; default ``Assign_<n>``.

    Returns:
        ref.
    """
    _assign(ref, value, name, "flow.system.assign")
    return ref


# data-dependent row counts (legacy dynamic blobs) -----------------------------------------
def argwhere(condition: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """The coordinates of ``condition``'s nonzero elements, one row each, in row-major order.

    The blob is planned with one row per element of ``condition``; a step fills as many rows as
    the data hold, and every reader, return and watched value sees those rows only.

    Args:
        condition: a blob of any dtype (nonzero is true).
        dtype: the index dtype, ``flow.int32`` (default) or ``flow.int64``.
        name: the op name; default ``ArgWhere_<n>``.

    Returns:
        An integer blob of shape (number of nonzero elements, condition's rank); not differentiable.
    """
    try:
        dt = dtypes.int32 if dtype is None else dtypes.as_dtype(dtype)
    except TypeError as exc:
        raise build_error("flow.argwhere", f"argument dtype: {exc}") from None
    if dt not in (dtypes.int32, dtypes.int64):
        raise build_error("flow.argwhere", f"argument dtype must be flow.int32 or flow.int64, got {dt}")
    return apply("argwhere", [condition], {"dtype": dt}, name=op_name(name, "ArgWhere"))


def nonzero(a: Blob, name: str | None = None) -> Blob:
    """The coordinates of ``a``'s nonzero elements, one column each: ``argwhere`` transposed (legacy).

    Args:
        a: a blob of any dtype.
        name: names the nodes ``<name>_ArgWhere`` and ``<name>_Transpose``; default
            ``Nonzero_ArgWhere_<n>`` and ``Nonzero_Transpose_<n>``.

    Returns:
        An int32 blob of shape (a's rank, number of nonzero elements).
    """
    if name is None:
        where_name, transpose_name = op_name(None, "Nonzero_ArgWhere"), op_name(None, "Nonzero_Transpose")
    else:
        where_name, transpose_name = f"{name}_ArgWhere", f"{name}_Transpose"
    indices = argwhere(a, name=where_name)
    return apply("transpose", [indices], {"perm": (1, 0)}, name=transpose_name)


def sync_dynamic_resize(inputs: Blob, size: Blob, name: str | None = None) -> Blob:
    """The first ``size[0]`` rows of ``inputs`` (axis 0), a blob whose row count the data decide.

    Args:
        inputs: a blob of rank >= 1.
        size: a one-element int32 or int64 blob, at most inputs.shape[0] (else the step fails
            naming the op).
        name: the op name; default ``SyncDynamicResize_<n>``.

    Returns:
        A view of the leading rows; planned at inputs' shape; not differentiable.
    """
    return apply("sync_dynamic_resize", [inputs, size], {"axis": 0}, name=op_name(name, "SyncDynamicResize"))
