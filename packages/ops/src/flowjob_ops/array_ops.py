"""Top-level array functions of ``flow``: reshape, transpose, concat, cast, constant, slicing, ...

Functions that add a node of another op's type (``expand_dims`` is a ``reshape``) still take
one name of their own from the process-wide counter (``ExpandDims_<n>``).
"""
from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import Blob, apply, dtypes

from flowjob_ops.array_ops_extra import (
    assign, broadcast_to_compatible_with, constant_pad2d, diag, dim_gather, dynamic_reshape, elem_cnt, expand,
    masked_fill, ones, range, reflection_pad2d, replication_pad2d, reshape_like, same_padding, slice_update, slice_v2,
    zero_pad2d, zeros)
from flowjob_ops.array_ops_extra import argwhere, nonzero, sync_dynamic_resize
from flowjob_ops.array_ops_more import (
    batch_gather, cast_to_current_logical_view, cast_to_static_shape, gather_nd, hierarchical_parallel_cast,
    identity_n, pad, pad_grad, parallel_cast, reverse, scatter_nd, stack, tensor_scatter_nd_add,
    tensor_scatter_nd_update, tile)
from flowjob_ops.records.common import build_error, op_name
from flowjob_ops.math import argmax, matmul
from flowjob_ops.sorting_ops import (
    argsort, in_top_k, sort, unsorted_batch_segment_sum, unsorted_segment_sum, unsorted_segment_sum_like)

__all__ = [
    "argmax", "broadcast_like", "cast", "clamp", "clip", "clip_by_scalar", "clip_by_value", "concat", "constant",
    "constant_like", "expand_dims", "flatten", "gather", "identity", "matmul", "one_hot", "ones_like",
    "random_normal", "random_uniform", "reshape",
    "slice", "squeeze", "transpose", "where", "zeros_like",
    # the rest of the legacy layout and indexing surface, from array_ops_more
    "batch_gather", "cast_to_current_logical_view", "cast_to_static_shape", "gather_nd", "hierarchical_parallel_cast",
    "identity_n", "pad", "pad_grad", "parallel_cast", "reverse", "scatter_nd", "stack", "tensor_scatter_nd_add",
    "tensor_scatter_nd_update", "tile",
    # sorting and segment sums legacy exported at top level, from sorting_ops
    "argsort", "in_top_k", "sort", "unsorted_batch_segment_sum", "unsorted_segment_sum", "unsorted_segment_sum_like",
    # strided slices, fills, expand, diag, 2-d paddings, assign, ... from array_ops_extra
    "assign", "broadcast_to_compatible_with", "constant_pad2d", "diag", "dim_gather", "dynamic_reshape", "elem_cnt",
    "expand", "masked_fill", "ones", "range", "reflection_pad2d", "replication_pad2d", "reshape_like", "same_padding",
    "slice_update", "slice_v2", "zero_pad2d", "zeros",
    # data-dependent row counts (argwhere, nonzero, sync_dynamic_resize), from array_ops_extra
    "argwhere", "nonzero", "sync_dynamic_resize",
]


def reshape(x: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """The same elements in a new shape (a view, nothing is copied).

    Args:
        x: a blob.
        shape: the new shape; one entry may be -1 and is inferred.
        name: the op name; default ``Reshape_<n>``.

    Returns:
        A blob of the new shape.
    """
    return apply("reshape", [x], {"shape": tuple(shape) if not isinstance(shape, int) else (shape,)}, name=name)


def flatten(input: Blob, start_dim: int = 0, end_dim: int = -1, name: str | None = None) -> Blob:  # noqa: A002
    """Axes ``start_dim`` .. ``end_dim`` merged into one.

    Args:
        input: a blob.
        start_dim: the first axis to merge.
        end_dim: the last axis to merge (inclusive; negative counts from the end).
        name: the op name; default ``Flatten_<n>``.

    Returns:
        A reshaped blob (a view).
    """
    rank = len(input.shape)
    start, end = start_dim % max(rank, 1), end_dim % max(rank, 1)
    if rank and start > end:
        raise build_error("flow.flatten",
                          f"start_dim {start_dim} comes after end_dim {end_dim} for shape {input.shape}")
    merged = int(np.prod(input.shape[start:end + 1], dtype=np.int64))
    shape = input.shape[:start] + (merged,) + input.shape[end + 1:] if rank else (1,)
    return apply("reshape", [input], {"shape": shape}, name=op_name(name, "Flatten"))


def expand_dims(input: Blob, axis: int, name: str | None = None) -> Blob:  # noqa: A002 - legacy name
    """A new axis of size 1 at ``axis``.

    Args:
        input: a blob.
        axis: where the new axis goes, in -(rank+1) .. rank.
        name: the op name; default ``ExpandDims_<n>``.

    Returns:
        A reshaped blob (a view).
    """
    rank = len(input.shape)
    if not -rank - 1 <= axis <= rank:
        raise build_error("flow.expand_dims", f"axis {axis} is out of range for shape {input.shape}")
    axis = axis % (rank + 1)
    shape = input.shape[:axis] + (1,) + input.shape[axis:]
    return apply("reshape", [input], {"shape": shape}, name=op_name(name, "ExpandDims"))


def squeeze(input: Blob, axis: int | Sequence[int] | None = None, name: str | None = None) -> Blob:  # noqa: A002
    """Size-1 axes removed (all of them, or those in ``axis``).

    Args:
        input: a blob.
        axis: None, an int or a list of ints naming size-1 axes.
        name: the op name; default ``Squeeze_<n>``.

    Returns:
        A reshaped blob (a view); shape (1,) when every axis is squeezed, as in legacy.
    """
    rank = len(input.shape)
    if axis is None:
        drop = {i for i, d in enumerate(input.shape) if d == 1}
    else:
        items = [axis] if isinstance(axis, numbers.Integral) else list(axis)
        if any(not -rank <= a < rank for a in items):
            raise build_error("flow.squeeze", f"axis {axis} is out of range for shape {input.shape}")
        drop = {a % rank for a in items}
        if any(input.shape[a] != 1 for a in drop):
            raise build_error("flow.squeeze", f"axis {axis} of shape {input.shape} does not have size 1")
    # legacy's squeeze never makes a 0-d blob: squeezing every axis leaves shape (1,)
    shape = tuple(d for i, d in enumerate(input.shape) if i not in drop) or (1,)
    return apply("reshape", [input], {"shape": shape}, name=op_name(name, "Squeeze"))


def transpose(a: Blob, perm: Sequence[int] | None = None, conjugate: bool = False, batch_axis_non_change: bool = False,
              name: str | None = None) -> Blob:
    """The axes of ``a`` permuted.

    Args:
        a: a blob.
        perm: the new order of the axes; default reversed.
        conjugate: must be False (legacy raised NotImplementedError too: blobs are real).
        batch_axis_non_change: ignored (deprecated in legacy v0.4, which ignored it as well).
        name: the op name; default ``Transpose_<n>``.

    Returns:
        A blob with shape ``[a.shape[p] for p in perm]``.
    """
    if conjugate:
        raise NotImplementedError("flow.transpose(conjugate=True): blobs are real; legacy did not implement it either")
    return apply("transpose", [a], {"perm": None if perm is None else tuple(perm)}, name=name)


def concat(values: Sequence[Blob], axis: int = 0, name: str | None = None) -> Blob:
    """Blobs joined along ``axis``.

    Args:
        values: a non-empty list of blobs of one dtype and rank, equal off ``axis``.
        axis: the axis to join along.
        name: the op name; default ``Concat_<n>``.

    Returns:
        The joined blob.
    """
    return apply("concat", list(values), {"axis": axis}, name=name)


def identity(x: Blob, name: str | None = None) -> Blob:
    """``x`` itself under a new name.

    Args:
        x: a blob.
        name: the op name; default ``Identity_<n>``.

    Returns:
        A blob with x's value.
    """
    return apply("identity", [x], name=name)


def cast(x: Blob, dtype: Any, name: str | None = None) -> Blob:
    """``x`` converted to ``dtype`` (differentiable between floating dtypes only).

    Args:
        x: a blob.
        dtype: the target dtype (``flow.float``, ``flow.int32``, ...).
        name: the op name; default ``Cast_<n>``.

    Returns:
        A blob of x's shape in ``dtype``.
    """
    return apply("cast", [x], {"dtype": dtypes.as_dtype(dtype)}, name=name)


def constant(value: Any, dtype: Any = None, shape: Sequence[int] | None = None, name: str | None = None) -> Blob:
    """A constant blob: ``value`` broadcast to ``shape``.

    Args:
        value: a number or a (nested) list or array of numbers.
        dtype: default ``flow.float``.
        shape: default the shape of ``value``.
        name: the op name; default ``Constant_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    array = np.asarray(value)
    attrs = {"value": array.tolist(), "dtype": dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32,
             "shape": None if shape is None else tuple(shape)}
    return apply("constant", [], attrs, name=name)


def constant_like(like: Blob, value: float | int, dtype: Any = None, name: str | None = None) -> Blob:
    """``value`` in the shape of ``like``.

    Args:
        like: the blob whose shape (and, by default, dtype) to use.
        value: a Python number.
        dtype: the dtype; default like's.
        name: the op name; default ``ConstantLike_<n>``.

    Returns:
        A blob shaped like ``like``.
    """
    return apply("constant_like", [like], {"value": value, "dtype": None if dtype is None else dtypes.as_dtype(dtype)},
                 name=name)


def ones_like(like: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """Ones shaped like ``like``.

    Args:
        like: a blob.
        dtype: the dtype (legacy's second argument); default like's.
        name: the op name; default ``OnesLike_<n>`` (``ConstantLike_<n>`` with a dtype).

    Returns:
        A blob of ones.
    """
    if dtype is not None:  # legacy made every *_like a constant_like; a dtype needs the cast it does
        return constant_like(like, 1, dtype=dtype, name=name)
    return apply("ones_like", [like], name=name)


def zeros_like(like: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """Zeros shaped like ``like``.

    Args:
        like: a blob.
        dtype: the dtype (legacy's second argument); default like's.
        name: the op name; default ``ZerosLike_<n>`` (``ConstantLike_<n>`` with a dtype).

    Returns:
        A blob of zeros.
    """
    if dtype is not None:  # legacy made every *_like a constant_like; a dtype needs the cast it does
        return constant_like(like, 0, dtype=dtype, name=name)
    return apply("zeros_like", [like], name=name)


def slice(x: Blob, begin: Sequence[int | None], size: Sequence[int | None], name: str | None = None) -> Blob:  # noqa: A001
    """A box of ``x``: per axis a start and a length.

    Args:
        x: a blob.
        begin: one start per axis (None means 0; negative counts from the end).
        size: one length per axis (None or -1 means up to the end).
        name: the op name; default ``Slice_<n>``.

    Returns:
        The box as a new blob.
    """
    if not isinstance(begin, (list, tuple)) or not isinstance(size, (list, tuple)):
        raise build_error("flow.slice", f"begin and size must be lists or tuples, got {begin!r} and {size!r}")
    # legacy cuts a box running past the end at the end (begin 1, size 3 on an axis of 3 keeps 2)
    size = [s if b is None or s is None or not 0 <= b < d or b + s <= d or s > d else d - b
            for b, s, d in zip(begin, size, x.shape)]
    return apply("slice", [x], {"begin": tuple(begin), "size": tuple(size)}, name=name)


def getitem(x: Blob, index: Any) -> Blob:
    """``x[index]`` for ints and step-1 slices (the ``Blob.__getitem__`` operator): a ``slice`` node, then
    a ``reshape`` dropping the axes indexed by ints; both named from one ``Slice_<n>``."""
    items = list(index) if isinstance(index, tuple) else [index]
    if len(items) > len(x.shape):
        raise IndexError(f"blob {x.lbn!r} of shape {x.shape} indexed with {len(items)} indices")
    begin: list[int] = []
    size: list[int] = []
    kept: list[int] = []
    for axis, dim in enumerate(x.shape):
        item = items[axis] if axis < len(items) else builtins.slice(None)
        if isinstance(item, numbers.Integral) and not isinstance(item, bool):
            if not -dim <= item < dim:
                raise IndexError(f"index {item} is out of range for axis {axis} of {x.lbn!r} with size {dim}")
            begin.append(int(item) % dim)
            size.append(1)
        elif isinstance(item, builtins.slice) and item.step in (None, 1):
            start, stop, _ = item.indices(dim)
            if stop <= start:
                raise IndexError(f"slice {item} selects nothing from axis {axis} of {x.lbn!r} with size {dim}")
            begin.append(start)
            size.append(stop - start)
            kept.append(axis)
        else:
            raise TypeError(f"blobs support indexing with ints and step-1 slices only, got {item!r}")
    node = op_name(None, "Slice")
    out = apply("slice", [x], {"begin": tuple(begin), "size": tuple(size)}, name=node)
    if len(kept) != len(x.shape):
        out = apply("reshape", [out], {"shape": tuple(size[a] for a in kept)}, name=f"{node}_reshape")
    return out


def gather(params: Blob, indices: Blob, validate_indices: Any = None, axis: int | None = None,
           batch_dims: int = 0, name: str | None = None) -> Blob:
    """``params`` indexed by ``indices`` along ``axis``.

    Args:
        params: a blob.
        indices: an integer blob; negative indices count from the end.
        validate_indices: ignored (legacy argument).
        axis: the axis of params to index (default 0).
        batch_dims: 0, or > 0 with axis == batch_dims: then, as legacy, a ``batch_gather`` (along axis
            rank(indices) - 1 whatever batch_dims says: BERT passes batch_dims=2 with indices of rank 2).
        name: the op name; default ``Gather_<n>``.

    Returns:
        A blob of shape params.shape[:axis] + indices.shape + params.shape[axis + 1:].
    """
    if batch_dims > 0:
        # legacy: the batched form gathers along axis == batch_dims, a batch_gather node
        axis = batch_dims if axis is None else axis % max(len(params.shape), 1)
        if axis != batch_dims:
            raise build_error("flow.gather", f"batch_dims={batch_dims} gathers along axis {batch_dims}, got "
                                             f"axis={axis}")
        return batch_gather(params, indices, name=name)
    if batch_dims != 0:
        raise build_error("flow.gather", f"batch_dims must be >= 0, got {batch_dims}")
    return apply("gather", [params, indices], {"axis": 0 if axis is None else axis}, name=name)


def where(condition: Blob, x: Blob | None = None, y: Blob | None = None, name: str | None = None) -> Blob:
    """``x`` where ``condition`` holds, else ``y`` (all three broadcast); without x and y, ``argwhere``.

    Args:
        condition: a bool or integer blob (nonzero is true).
        x: a blob, or None together with y.
        y: a blob of x's dtype, or None together with x.
        name: the op name; default ``Where_<n>`` (``ArgWhere_<n>`` for the one-argument form).

    Returns:
        A blob of the broadcast shape; ``where(condition)`` is ``argwhere(condition)``: int32
        coordinates of the nonzero elements, as many rows as the data hold.
    """
    if x is None and y is None:
        return argwhere(condition, name=name)  # legacy: the indices form
    if x is None or y is None:
        raise build_error("flow.where", "x and y must both be blobs or both be None (the one-argument form is "
                                        "argwhere); exactly one of them is None")
    return apply("where", [condition, x, y], name=name)


def clip_by_value(values: Blob, min_value: float | None = None, max_value: float | None = None,
                  name: str | None = None) -> Blob:
    """``values`` limited to [min_value, max_value].

    Args:
        values: a blob.
        min_value: the lower bound, or None.
        max_value: the upper bound, or None.
        name: the op name; default ``ClipByValue_<n>``.

    Returns:
        A blob like values; the gradient passes where min_value <= x <= max_value.
    """
    if min_value is None and max_value is None:
        raise build_error("flow.clip_by_value", "min_value and max_value cannot both be None")
    if isinstance(values, Blob) and values.dtype.kind in "iu":
        # legacy passed integer blobs int(bound): a fractional bound is truncated toward zero
        min_value, max_value = (b if b is None or isinstance(b, bool) or not isinstance(b, numbers.Real)
                                else int(b) for b in (min_value, max_value))
    return apply("clip_by_value", [values], {"min_value": min_value, "max_value": max_value}, name=name)


clip = clamp = clip_by_scalar = clip_by_value  # legacy exported these names for the same function


def broadcast_like(x: Blob, like: Blob, broadcast_axes: Sequence[int] | None = None, name: str | None = None) -> Blob:
    """``x`` broadcast to the shape of ``like``.

    Args:
        x: a blob.
        like: the blob whose shape to take.
        broadcast_axes: the axes of ``like`` that ``x`` is broadcast along: x has size 1 there, or lacks
            them (it is expanded there first); default: numpy rules.
        name: the op name; default ``BroadcastLike_<n>``.

    Returns:
        A blob of like's shape and x's dtype.
    """
    target = tuple(like.shape)
    attrs: dict[str, Any] = {"shape": target}
    node = op_name(name, "BroadcastLike")
    if broadcast_axes is not None:
        rank = len(target)
        items = list(broadcast_axes)
        if not 0 < len(items) <= rank or any(not -rank <= a < rank for a in items):
            raise build_error("flow.broadcast_like", f"broadcast_axes {tuple(items)} must name 1..{rank} axes of "
                                                     f"like's shape {target}")
        axes = sorted({a % rank for a in items})
        # legacy takes x in either form: with the broadcast axes kept as 1 (same rank as like, which
        # broadcasts as it is) or with them dropped (they are put back as 1 first)
        if len(x.shape) != rank:
            shape = list(x.shape)
            for a in axes:
                shape.insert(a, 1)
            x = apply("reshape", [x], {"shape": tuple(shape)}, name=f"{node}_expand")
    return apply("broadcast_to", [x], attrs, name=node)


def one_hot(indices: Blob, depth: int, on_value: float | int = 1, off_value: float | int = 0, axis: int = -1,
            dtype: Any = None, name: str | None = None) -> Blob:
    """One-hot encoding of integer ``indices``.

    Args:
        indices: an integer blob.
        depth: the number of classes.
        on_value: the value at the index.
        off_value: the value elsewhere.
        axis: where the new class axis goes.
        dtype: default ``flow.float``.
        name: the op name; default ``OneHot_<n>``.

    Returns:
        A blob with a new axis of length ``depth``.
    """
    attrs = {"depth": depth, "on_value": on_value, "off_value": off_value, "axis": axis,
             "dtype": None if dtype is None else dtypes.as_dtype(dtype)}
    return apply("one_hot", [indices], attrs, name=name)


def random_uniform(shape: Sequence[int], dtype: Any = None, minval: float = 0.0, maxval: float = 1.0,
                   seed: int | None = None, name: str | None = None) -> Blob:
    """Uniform random numbers in [minval, maxval), drawn anew every step.

    Args:
        shape: the shape.
        dtype: a floating dtype; default ``flow.float``.
        minval: the lower bound.
        maxval: the upper bound.
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``RandomUniform_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    attrs = {"shape": tuple(shape), "dtype": None if dtype is None else dtypes.as_dtype(dtype), "minval": minval,
             "maxval": maxval, "seed": seed}
    return apply("random_uniform", [], attrs, name=name)


def random_normal(shape: Sequence[int], mean: float = 0.0, stddev: float = 1.0, dtype: Any = None,
                  seed: int | None = None, name: str | None = None) -> Blob:
    """Normal random numbers, drawn anew every step.

    Args:
        shape: the shape.
        mean: the mean.
        stddev: the standard deviation.
        dtype: a floating dtype; default ``flow.float``.
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``RandomNormal_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    attrs = {"shape": tuple(shape), "dtype": None if dtype is None else dtypes.as_dtype(dtype), "mean": mean,
             "stddev": stddev, "seed": seed}
    return apply("random_normal", [], attrs, name=name)
