"""Public sorting, segment, triangular and polynomial functions (legacy v0.4 names and arguments).

``flowjob_ops.math`` re-exports the ``flow.math.*`` ones and ``flowjob_ops.array_ops``
the top-level ones (``flow.sort``, ``flow.argsort``, ``flow.in_top_k``, the segment sums), where
legacy exported them. sort, argsort and top_k work on the last axis; another ``axis`` is moved last
by a transpose (``<name>_transpose``) and back (``<name>_inverse_transpose``), as legacy did.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name
from flowjob_ops.records.sorting import DIRECTIONS


def _along_axis(op: str, what: str, input: Blob, axis: int, attrs: dict, name: str) -> Blob:  # noqa: A002
    """``op`` on ``input`` along ``axis``: the op itself works on the last axis."""
    rank = len(input.shape)
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -rank <= axis < rank:
        raise build_error(what, f"axis {axis!r} is out of range for the rank-{rank} input {input.shape}")
    axis = int(axis) % rank
    if axis == rank - 1:
        return apply(op, [input], attrs, name=name)
    perm = tuple(d if d < axis else d + 1 for d in range(rank - 1)) + (axis,)
    inverse = tuple(perm.index(d) for d in range(rank))
    moved = apply("transpose", [input], {"perm": perm}, name=name + "_transpose")
    done = apply(op, [moved], attrs, name=name)
    return apply("transpose", [done], {"perm": inverse}, name=name + "_inverse_transpose")


def _direction(what: str, direction: Any) -> str:
    if direction not in DIRECTIONS:
        raise build_error(what, f"direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}")
    return direction


def sort(input: Blob, axis: int = -1, direction: str = "ASCENDING", name: str | None = None) -> Blob:  # noqa: A002
    """``input`` sorted along ``axis``; equal values keep their order.

    Args:
        input: a numeric blob.
        axis: the axis to sort; default the last.
        direction: ``"ASCENDING"`` or ``"DESCENDING"``.
        name: the op name; default ``Sort_<n>``.

    Returns:
        A blob shaped and typed like ``input``. (flowjob gives sort a gradient, the permutation's
        transpose; legacy had none.)
    """
    attrs = {"direction": _direction("flow.sort", direction)}
    return _along_axis("sort", "flow.sort", input, axis, attrs, op_name(name, "Sort"))


def argsort(input: Blob, axis: int = -1, direction: str = "ASCENDING", name: str | None = None) -> Blob:  # noqa: A002
    """The int32 indices that sort ``input`` along ``axis``; ties list the lower index first, in
    both directions (legacy's order: ``[1, 2, 2]`` descending is ``[1, 2, 0]``).

    Args:
        input: a numeric blob.
        axis: the axis to sort; default the last.
        direction: ``"ASCENDING"`` or ``"DESCENDING"``.
        name: the op name; default ``ArgSort_<n>``.
    """
    attrs = {"direction": _direction("flow.argsort", direction)}
    return _along_axis("arg_sort", "flow.argsort", input, axis, attrs, op_name(name, "ArgSort"))


def top_k(input: Blob, axis: int = -1, k: int = 1, sorted: bool = True,  # noqa: A002 - legacy names
          name: str | None = None) -> Blob:
    """The int32 indices of the ``k`` largest entries along ``axis``, largest first (legacy returns
    indices only). Note legacy's argument order: ``axis`` comes before ``k``.

    Args:
        input: a numeric blob.
        axis: the axis to search; default the last.
        k: how many; more than the axis holds gives the whole axis, as in legacy.
        sorted: legacy leaves the order of an unsorted result open; flowjob always returns the
            sorted one. Equal values list the lower index first.
        name: the op name; default ``TopK_<n>``.
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise build_error("flow.math.top_k", f"k must be an int >= 1, got {k!r}")
    if not isinstance(sorted, bool):
        raise build_error("flow.math.top_k", f"sorted must be a bool, got {sorted!r}")
    attrs = {"k": int(k), "sorted": sorted}
    return _along_axis("top_k", "flow.math.top_k", input, axis, attrs, op_name(name, "TopK"))


def in_top_k(targets: Blob, predictions: Blob, k: int, name: str | None = None) -> Blob:
    """Whether each target class is among the ``k`` highest predictions of its row.

    A target counts when fewer than ``k`` classes score strictly higher (so ties at the boundary
    count); a target out of range or a row holding a non-finite score gives 0, as in legacy.

    Args:
        targets: int32 or int64 class ids, shape ``(n,)``.
        predictions: float32 scores, shape ``(n, classes)``.
        k: how many top classes to look at.
        name: the op name; default ``InTopK_<n>``.

    Returns:
        An int8 blob of shape ``(n,)`` (legacy's bool).
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise build_error("flow.math.in_top_k", f"k must be an int, got {k!r}")
    return apply("in_top_k", [targets, predictions], {"k": int(k)}, name=name)


def unsorted_segment_sum(data: Blob, segment_ids: Blob, num_segments: int, axis: int = 0,
                         name: str | None = None) -> Blob:
    """Sums of ``data`` by segment: ``out[..., s, ...]`` adds every slice whose id is ``s``.

    Args:
        data: a numeric blob.
        segment_ids: integer ids shaped like the axes of data from ``axis`` on (one or more).
        num_segments: the number of segments; ids outside ``[0, num_segments)`` add nothing.
        axis: the first axis of data the ids cover.
        name: the op name; default ``UnsortedSegmentSum_<n>``.

    Returns:
        ``data.shape[:axis] + (num_segments,) + data.shape[axis + segment_ids.ndim:]``.
    """
    attrs = {"axis": axis, "num_segments": num_segments}
    return apply("unsorted_segment_sum", [data, segment_ids], attrs, name=name)


def unsorted_segment_sum_like(data: Blob, segment_ids: Blob, like: Blob, axis: int = 0,
                              name: str | None = None) -> Blob:
    """``unsorted_segment_sum`` with the output shape (and num_segments) taken from ``like``.

    Args:
        data: a numeric blob.
        segment_ids: integer ids shaped like the axes of data from ``axis`` on.
        like: a blob of data's dtype and the result's shape; only its shape is read.
        axis: the first axis of data the ids cover.
        name: the op name; default ``UnsortedSegmentSumLike_<n>``.
    """
    return apply("unsorted_segment_sum_like", [data, segment_ids, like], {"axis": axis}, name=name)


def unsorted_batch_segment_sum(data: Blob, segment_ids: Blob, num_segments: int, name: str | None = None) -> Blob:
    """A segment sum per batch position: ids of shape ``data.shape[:m]`` sum axis ``m - 1`` of data
    separately for each index of the first ``m - 1`` axes.

    Args:
        data: a numeric blob.
        segment_ids: integer ids, shape ``data.shape[:m]``.
        num_segments: the number of segments; ids outside ``[0, num_segments)`` add nothing.
        name: the op name; default ``UnsortedBatchSegmentSum_<n>``.

    Returns:
        data's shape with axis ``m - 1`` replaced by ``num_segments``.
    """
    return apply("unsorted_batch_segment_sum", [data, segment_ids], {"num_segments": num_segments}, name=name)


def _number(what: str, arg: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"{arg} must be a Python number, got {value!r}")
    return value


def tril(x: Blob, diagonal: int = 0, fill_value: float | int = 0, name: str | None = None) -> Blob:
    """The lower triangle of the last two axes: element (i, j) is kept when ``j <= i + diagonal``.

    Args:
        x: a numeric blob of rank >= 2.
        diagonal: which diagonal bounds the triangle (> 0 above the main one, < 0 below).
        fill_value: the value of the dropped elements.
        name: the op name; default ``Tril_<n>``.
    """
    attrs = {"diagonal": diagonal, "fill_value": _number("flow.math.tril", "fill_value", fill_value)}
    return apply("tril", [x], attrs, name=name)


def fused_scale_tril(x: Blob, diagonal: int = 0, fill_value: float | int = 0, scale: float | int = 1,
                     name: str | None = None) -> Blob:
    """``tril(x * scale)`` in one op; the fill value is not scaled.

    Args:
        x: a numeric blob of rank >= 2.
        diagonal: which diagonal bounds the triangle.
        fill_value: the value of the dropped elements.
        scale: the factor of the kept ones.
        name: the op name; default ``FusedScaleTril_<n>``.
    """
    attrs = {"diagonal": diagonal, "fill_value": _number("flow.math.fused_scale_tril", "fill_value", fill_value),
             "scale": _number("flow.math.fused_scale_tril", "scale", scale)}
    return apply("fused_scale_tril", [x], attrs, name=name)


def polyval(coeffs: Sequence[float | int], x: Blob, name: str | None = None) -> Blob:
    """The polynomial ``coeffs[0] * x**(n-1) + ... + coeffs[-1]`` at every element of ``x``.

    As in legacy, Horner's rule in graph nodes: ``p = zeros_like(x)`` (named ``name``), then
    ``p = c + p * x`` for each coefficient, so the gradient comes from those nodes.

    Args:
        coeffs: a list or tuple of Python numbers, highest power first; empty gives zeros.
        x: a blob.
        name: the name of the zeros node; default ``Polyval_<n>``.
    """
    from flowjob_ops.math import add, multiply  # math re-exports this module

    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"flow.math.polyval: coeffs must be a list or tuple, got {type(coeffs).__name__}")
    for c in coeffs:
        _number("flow.math.polyval", "each of coeffs", c)
    p = apply("zeros_like", [x], name=op_name(name, "Polyval"))
    for c in coeffs:
        p = add(c, multiply(p, x))
    return p
