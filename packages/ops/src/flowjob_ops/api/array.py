"""Top-level shape and layout functions of ``flow``: reshape, flatten, expand_dims, squeeze, transpose,
concat, stack, tile, reverse, identity, cast, the broadcasts, and the parallel casts, which on one device
are identities.

Functions that add a node of another op's type (``expand_dims`` is a ``reshape``) still take
one name of their own from the process-wide counter (``ExpandDims_<n>``).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import Blob, apply
from flowjob_core.ir import distribute, dtypes

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.records.common import is_int


NAMESPACES = {
    "flow": ["amp_white_identity", "broadcast_like", "broadcast_to_compatible_with", "cast",
             "cast_to_current_logical_view", "cast_to_static_shape", "concat", "dynamic_reshape", "elem_cnt", "expand",
             "expand_dims", "flatten", "hierarchical_parallel_cast", "identity", "identity_n", "parallel_cast",
             "reshape", "reshape_like", "reverse", "squeeze", "stack", "tile", "transpose"],
    "flow.math": ["broadcast_to_compatible_with"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


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


def concat(inputs: Sequence[Blob] | None = None, axis: int = 0, max_dim_size: int | None = None,
           name: str | None = None, values: Sequence[Blob] | None = None) -> Blob:
    """Blobs joined along ``axis``.

    Args:
        inputs: a non-empty list of blobs of one dtype and rank, equal off ``axis``.
        axis: the axis to join along.
        max_dim_size: legacy's bound on the joined axis when dynamic blobs (mirrored placeholders, rows
            the data decide, and what is computed from them) take part: the static inputs' extents must
            fit in it, and the joined blob is dynamic with ``max_dim_size`` as its traced extent along
            ``axis`` (legacy's static shape); each call's extent is the inputs' actual sum, at most
            ``max_dim_size``. With static inputs only, the extent is their sum.
        name: the op name; default ``Concat_<n>``.
        values: legacy's older name of ``inputs``.

    Returns:
        The joined blob.
    """
    if values is not None:
        if inputs is not None:
            raise build_error("flow.concat", "give inputs or values (its older name), not both")
        inputs = values
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise build_error("flow.concat", f"inputs must be a non-empty list of blobs, got {inputs!r}")
    if max_dim_size is not None:
        _check_max_dim_size(inputs, axis, max_dim_size)
        if any(isinstance(b, Blob) and b.is_dynamic for b in inputs):
            return apply("bounded_concat", list(inputs), {"axis": axis, "max_dim_size": int(max_dim_size)},
                         name=name)
    return apply("concat", list(inputs), {"axis": axis}, name=name)


def _check_max_dim_size(inputs: Sequence[Blob], axis: int, max_dim_size: Any) -> None:
    if isinstance(max_dim_size, bool) or not isinstance(max_dim_size, (int, np.integer)) or max_dim_size < 0:
        raise build_error("flow.concat", f"max_dim_size must be a non-negative int, got {max_dim_size!r}")
    rank = len(inputs[0].shape) if isinstance(inputs[0], Blob) else 0
    if not isinstance(axis, (int, np.integer)) or not -rank <= axis < rank:
        return  # the op's own inference names a bad axis
    static = sum(b.shape[axis] for b in inputs if isinstance(b, Blob) and not b.is_dynamic)
    if static > max_dim_size:
        raise build_error("flow.concat", f"the static inputs add up to {static} along axis {axis}, more than "
                                         f"max_dim_size={max_dim_size}")


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


def identity(x: Blob, name: str | None = None) -> Blob:
    """``x`` itself under a new name.

    Args:
        x: a blob.
        name: the op name; default ``Identity_<n>``.

    Returns:
        A blob with x's value.
    """
    return apply("identity", [x], name=name)


def amp_white_identity(x: Blob, name: str | None = None) -> Blob:
    """``x`` itself, marked for auto mixed precision as a white-list op (legacy's marker op), so with
    ``enable_auto_mixed_precision`` it runs, and lets what follows run, in float16.

    Args:
        x: any blob.
        name: the op name; default ``AmpWhiteIdentity_<n>``.
    """
    return apply("amp_white_identity", [x], name=name)


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


def cast(x: Blob, dtype: Any, name: str | None = None) -> Blob:
    """``x`` converted to ``dtype`` (differentiable for every dtype: the gradient is cast back, as in legacy).

    Args:
        x: a blob.
        dtype: the target dtype (``flow.float``, ``flow.int32``, ...).
        name: the op name; default ``Cast_<n>``.

    Returns:
        A blob of x's shape in ``dtype``.
    """
    return apply("cast", [x], {"dtype": dtypes.as_dtype(dtype)}, name=name)


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
    if new_rank < rank or not all(is_int(s) for s in sizes):
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
    name = op_name(name, "BroadcastToCompatibleWith")
    if any(b.is_dynamic for b in [x, *compatible]):  # the shape comes from the blobs at each call, as in legacy
        return apply("broadcast_to_compatible_with", [x, *compatible], name=name)
    return apply("broadcast_to", [x], {"shape": tuple(shape)}, name=name)


# one device: nothing to distribute ------------------------------------------------------------
def cast_to_current_logical_view(x: Blob) -> Blob:
    """``x`` itself: on one device a blob is already in the current logical view."""
    return x


def cast_to_static_shape(x: Blob, name: str | None = None) -> Blob:
    """``x`` as a static blob (``is_dynamic`` false): a static ``x`` itself, as legacy returned it; a dynamic one
    through an identity named ``CastToStaticShape_<n>``. Shapes here are inferred again for every call's data,
    so the values are ``x``'s actual ones (legacy's static blob had the declared maximum shape)."""
    if not x.is_dynamic:
        return x
    out = apply("identity", [x], name=op_name(name, "CastToStaticShape"))
    out.dynamic = False
    return out


def _check_distribute(value: Any, what: str, arg: str) -> None:
    """None, a legacy distribute (``flow.distribute.split(0)``, ``broadcast()``) or its string form."""
    if value is None or isinstance(value, str) or getattr(value, "kind", None) in ("split", "broadcast"):
        return
    raise build_error(what, f"{arg} must be a flow.distribute.split(axis)/broadcast() or None, got {value!r}")


def _as_distribute(value: Any, what: str, arg: str) -> Any:
    """A legacy distribute, or None: the object itself, or from legacy's string form (``"S(0)"``, ``"B"``)."""
    if value is None or getattr(value, "kind", None) in ("split", "broadcast"):
        return value
    if isinstance(value, str):
        text = value.strip().upper()
        if text == "B":
            return distribute.broadcast()
        if text.startswith("S(") and text.endswith(")") and text[2:-1].strip().lstrip("-").isdigit():
            return distribute.split(int(text[2:-1]))
        raise build_error(what, f"{arg} must be 'B' or 'S(axis)' as a string, got {value!r}")
    raise build_error(what, f"{arg} must be a flow.distribute.split(axis)/broadcast() or None, got {value!r}")


def parallel_cast(input: Blob, name: str | None = None, distribute: Any = None,  # noqa: A002 - legacy name
                  gradient_distribute: Any = None) -> Blob:
    """``input`` unchanged, laid out as ``distribute`` says for its readers, its gradient as ``gradient_distribute``
    says (``Blob.with_distribute`` / ``with_gradient_distribute`` of the identity; on one device neither changes
    anything).

    Args:
        input: a blob.
        name: the op name; default ``ParallelCast_<n>``.
        distribute: the layout its readers see: ``flow.distribute.split(axis)`` / ``broadcast()``, or legacy's
            string form ``"S(axis)"`` / ``"B"``.
        gradient_distribute: the layout of the gradient arriving at it, likewise.

    Returns:
        An identity of ``input``.
    """
    laid = _as_distribute(distribute, "flow.parallel_cast", "distribute")
    gradient = _as_distribute(gradient_distribute, "flow.parallel_cast", "gradient_distribute")
    out = apply("identity", [input], name=op_name(name, "ParallelCast"))
    if laid is not None:
        out = out.with_distribute(laid)
    if gradient is not None:
        out = out.with_gradient_distribute(gradient)
    return out


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
