"""Top-level indexing functions of ``flow``: slices (plain, strided, updated), gathers and scatters,
where, masked_fill, one_hot, diag; and argwhere, nonzero and sync_dynamic_resize, whose row count the
data decide (``records/data_dependent.py``). ``getitem`` is the ``Blob.__getitem__`` operator."""
from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.records.common import is_int
from flowjob_ops.records.indexing import strided_bounds


__all__ = ["argwhere", "batch_gather", "diag", "dim_gather", "gather", "gather_nd", "masked_fill", "nonzero",
           "one_hot", "scatter_nd", "slice", "slice_update", "slice_v2", "sync_dynamic_resize",
           "tensor_scatter_nd_add", "tensor_scatter_nd_update", "where"]


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
        # every axis indexed by an int: (1,), as legacy's blobs were never 0-d
        shape = tuple(size[a] for a in kept) or (1,)
        if shape != out.shape:
            out = apply("reshape", [out], {"shape": shape}, name=f"{node}_reshape")
    return out


def _slice_attrs(x: Blob, slice_tup_list: Any, what: str) -> dict[str, tuple[int | None, ...]]:
    """(start, stop, step) per axis; a short list leaves the trailing axes whole (legacy)."""
    rank = len(x.shape)
    if not isinstance(slice_tup_list, (list, tuple)) or len(slice_tup_list) > rank:
        raise build_error(what, f"slice_tup_list must be a list or tuple of at most {rank} (start, stop, step) "
                                f"entries for shape {x.shape}, got {slice_tup_list!r}")
    items = list(slice_tup_list) + [(None, None, None)] * (rank - len(slice_tup_list))
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 3 or any(
                v is not None and not is_int(v) for v in item):
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


def gather_nd(params: Blob, indices: Blob, name: str | None = None) -> Blob:
    """The elements (or slices) of ``params`` that the rows of ``indices`` name.

    Args:
        params: a blob.
        indices: an integer blob whose last axis holds k <= rank(params) leading coordinates.
        name: the op name; default ``GatherNd_<n>``.

    Returns:
        A blob of shape ``indices.shape[:-1] + params.shape[k:]``.
    """
    return apply("gather_nd", [params, indices], name=name)


def scatter_nd(indices: Blob, updates: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """``updates`` placed into zeros of ``shape`` where ``indices`` say (repeated indices add up).

    Args:
        indices: an integer blob whose last axis holds k <= len(shape) leading coordinates.
        updates: a blob of shape ``indices.shape[:-1] + shape[k:]``.
        shape: the shape of the result.
        name: the op name; default ``ScatterNd_<n>``.

    Returns:
        A blob of ``shape`` in updates' dtype.
    """
    return apply("scatter_nd", [indices, updates], {"shape": tuple(shape)}, name=name)


def tensor_scatter_nd_update(params: Blob, indices: Blob, updates: Blob, name: str | None = None) -> Blob:
    """``params`` with the elements (or slices) ``indices`` name replaced by ``updates``.

    Args:
        params: a blob.
        indices: an integer blob whose last axis holds k <= rank(params) leading coordinates.
        updates: a blob of params' dtype and shape ``indices.shape[:-1] + params.shape[k:]``.
        name: the op name; default ``TensorScatterNdUpdate_<n>``.

    Returns:
        A blob like ``params``.
    """
    return apply("tensor_scatter_nd_update", [params, indices, updates], name=name)


def tensor_scatter_nd_add(params: Blob, indices: Blob, updates: Blob, name: str | None = None) -> Blob:
    """``params`` with ``updates`` added at the elements (or slices) ``indices`` name.

    Args:
        params: a blob.
        indices: an integer blob whose last axis holds k <= rank(params) leading coordinates.
        updates: a blob of params' dtype and shape ``indices.shape[:-1] + params.shape[k:]``.
        name: the op name; default ``TensorScatterNdAdd_<n>``.

    Returns:
        A blob like ``params``.
    """
    return apply("tensor_scatter_nd_add", [params, indices, updates], name=name)


def batch_gather(params: Blob, indices: Blob, name: str | None = None) -> Blob:
    """``params`` gathered along axis ``rank(indices) - 1``, separately for each position of the
    leading axes, which ``indices`` shares with ``params`` (legacy ``flow.gather`` with ``batch_dims``).

    Args:
        params: a blob.
        indices: an integer blob of rank m <= rank(params) with ``indices.shape[:m-1] == params.shape[:m-1]``.
        name: the op name; default ``BatchGather_<n>``.

    Returns:
        A blob like params with axis m-1 of size ``indices.shape[-1]``.
    """
    return apply("batch_gather", [params, indices], name=name)


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
    if not is_int(diagonal):
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
    if not is_int(dim) or not -len(index.shape) <= dim < len(index.shape):
        raise build_error("flow.dim_gather", f"dim {dim!r} is out of range for index of shape {index.shape}")
    return apply("dim_gather", [input, index], {"dim": int(dim) % len(index.shape)}, name=name)


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


# data-dependent row counts (legacy dynamic blobs) --------------------------------------------------
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
