"""Sorting along an axis (legacy v0.4): ``flow.sort``, ``flow.argsort``, ``flow.math.top_k`` and
``in_top_k`` (both namespaces). The ops work on the last axis; another ``axis`` is moved last by a
transpose (``<name>_transpose``) and back (``<name>_inverse_transpose``), as legacy did."""
from __future__ import annotations

import numbers
from typing import Any

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.records.sorting import DIRECTIONS


NAMESPACES = {
    "flow": ["argsort", "in_top_k", "sort"],
    "flow.math": ["in_top_k", "top_k"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


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
