"""The rest of legacy's top-level layout and indexing functions: pad, stack, tile, reverse,
identity_n, the nd gathers and scatters, and the parallel casts, which on one device are
identities. ``flowjob_ops.array_ops`` re-exports every name here (its ``__all__`` feeds ``flow.*``).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name


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


def stack(inputs: Sequence[Blob], axis: int = 0, name: str | None = None) -> Blob:
    """Blobs of one shape joined along a new axis.

    As in legacy, each input gets a new size-1 axis (``<name>expand_dims_<i>``, reshape nodes) and
    the results are concatenated (``<name>concat``), so the gradient is a split and reshapes.

    Args:
        inputs: a non-empty list of blobs of one shape and dtype.
        axis: where the new axis goes, in -(rank+1) .. rank.
        name: the name prefix; default ``Stack_<n>``.

    Returns:
        A blob of rank + 1 with ``len(inputs)`` along ``axis``.
    """
    items = list(inputs)
    if not items:
        raise build_error("flow.stack", "needs at least one input")
    shape = items[0].shape
    rank = len(shape)
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -rank - 1 <= axis <= rank:
        raise build_error("flow.stack", f"axis {axis!r} is out of range for inputs of shape {shape}")
    for blob in items[1:]:
        if blob.shape != shape:
            raise build_error("flow.stack", f"inputs need one shape, got {shape} and {blob.shape}")
    axis = int(axis) % (rank + 1)
    prefix = op_name(name, "Stack")
    expanded = shape[:axis] + (1,) + shape[axis:]
    parts = [apply("reshape", [blob], {"shape": expanded}, name=f"{prefix}expand_dims_{i}")
             for i, blob in enumerate(items)]
    return apply("concat", parts, {"axis": axis}, name=f"{prefix}concat")


def tile(x: Blob, sizes: Sequence[int], name: str | None = None) -> Blob:
    """``x`` repeated along each axis (numpy's ``tile``).

    Args:
        x: a blob.
        sizes: how many copies along each axis; a shorter list counts from the last axis, a longer
            one gives x leading axes of size 1 first.
        name: the op name; default ``Tile_<n>``.

    Returns:
        A blob of shape ``x.shape[i] * sizes[i]``.
    """
    multiples = tuple(sizes) if not isinstance(sizes, numbers.Integral) else (sizes,)
    node = op_name(name, "Tile")
    extra = len(multiples) - len(x.shape)
    if extra > 0:
        x = apply("reshape", [x], {"shape": (1,) * extra + x.shape}, name=f"{node}_expand")
    return apply("tile", [x], {"multiples": multiples}, name=node)


def reverse(input: Blob, axis: int | Sequence[int], name: str | None = None) -> Blob:  # noqa: A002 - legacy
    """``input`` with its elements in reverse order along ``axis``.

    Args:
        input: a blob of rank >= 1.
        axis: an int or a list of ints (negative counts from the end).
        name: the op name; default ``Reverse_<n>``.

    Returns:
        A blob like ``input``.
    """
    axes = [axis] if isinstance(axis, numbers.Integral) else axis
    if not isinstance(axes, (list, tuple)) or any(isinstance(a, bool) or not isinstance(a, numbers.Integral)
                                                  for a in axes):
        raise build_error("flow.reverse", f"axis must be an int or a list/tuple of ints, got {axis!r}")
    return apply("reverse", [input], {"axis": tuple(int(a) for a in axes)}, name=name)


def identity_n(inputs: Sequence[Blob], name: str | None = None) -> list[Blob]:
    """Each blob of ``inputs`` unchanged, as one node with one output per input.

    Args:
        inputs: a non-empty list of blobs.
        name: the op name; default ``IdentityN_<n>``.

    Returns:
        A list of blobs, one per input.
    """
    outs = apply("tuple_identity", list(inputs), name=name)
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


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


# one device: the logical-view and parallel casts change nothing -------------------------
def cast_to_current_logical_view(x: Blob) -> Blob:
    """``x`` itself: on one device a blob is already in the current logical view."""
    return x


def cast_to_static_shape(x: Blob, name: str | None = None) -> Blob:
    """``x`` itself: flowjob blobs always have a static shape (legacy returns a static blob unchanged)."""
    return x


def _check_distribute(value: Any, what: str, arg: str) -> None:
    """None, a legacy distribute (``flow.distribute.split(0)``, ``broadcast()``) or its string form."""
    if value is None or isinstance(value, str) or getattr(value, "kind", None) in ("split", "broadcast"):
        return
    raise build_error(what, f"{arg} must be a flow.distribute.split(axis)/broadcast() or None, got {value!r}")


def parallel_cast(input: Blob, name: str | None = None, distribute: Any = None,  # noqa: A002 - legacy name
                  gradient_distribute: Any = None) -> Blob:
    """``input`` unchanged; on one device there is no distribution to change.

    Args:
        input: a blob.
        name: the op name; default ``ParallelCast_<n>``.
        distribute: the wanted distribution (checked, then without effect).
        gradient_distribute: the gradient's distribution (checked, then without effect).

    Returns:
        An identity of ``input``.
    """
    _check_distribute(distribute, "flow.parallel_cast", "distribute")
    _check_distribute(gradient_distribute, "flow.parallel_cast", "gradient_distribute")
    return apply("identity", [input], name=op_name(name, "ParallelCast"))


def hierarchical_parallel_cast(input: Blob, parallel_distribution: Sequence[Any],  # noqa: A002 - legacy name
                               grad_mode: str | None = None, grad_parallel_distribution: Sequence[Any] | None = None,
                               name: str | None = None) -> Blob:
    """``input`` unchanged; on one device there is no hierarchy to cast over.

    Args:
        input: a blob.
        parallel_distribution: one distribution per hierarchy level (checked, then without effect).
        grad_mode: ``None``, ``"restore"``, ``"identity"`` or ``"manual"``.
        grad_parallel_distribution: for ``grad_mode="manual"`` (checked, then without effect).
        name: the op name; default ``HierarchicalParallelCast_<n>``.

    Returns:
        An identity of ``input``.
    """
    what = "flow.hierarchical_parallel_cast"
    if isinstance(parallel_distribution, str) or not isinstance(parallel_distribution, (list, tuple)):
        raise build_error(what, f"parallel_distribution must be a list of distributions, got "
                                f"{parallel_distribution!r}")
    for item in list(parallel_distribution) + list(grad_parallel_distribution or ()):
        _check_distribute(item, what, "parallel_distribution")
    if grad_mode not in (None, "restore", "identity", "manual"):
        raise build_error(what, f"grad_mode must be None, 'restore', 'identity' or 'manual', got {grad_mode!r}")
    return apply("identity", [input], name=op_name(name, "HierarchicalParallelCast"))
