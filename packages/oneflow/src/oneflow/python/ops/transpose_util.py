"""``oneflow.python.ops.transpose_util``: permutations that move one axis last and back (legacy's top_k and
sort tests import them to check results along any axis)."""
from __future__ import annotations

from typing import Sequence


def is_perm(perm: Sequence[int]) -> bool:
    """Whether ``perm`` holds each of ``0 .. len(perm) - 1`` once."""
    return sorted(perm) == list(range(len(perm)))


def get_perm_when_transpose_axis_to_last_dim(num_axes: int, axis: int) -> tuple[int, ...]:
    """The permutation of ``num_axes`` axes that keeps the others in order and puts ``axis`` last."""
    if not -num_axes <= axis < num_axes:
        raise ValueError(f"axis {axis} is out of range for {num_axes} axes")
    axis %= num_axes
    return tuple(a for a in range(num_axes) if a != axis) + (axis,)


def get_inversed_perm(perm: Sequence[int]) -> tuple[int, ...]:
    """The permutation undoing ``perm``: transposing by ``perm``, then by this, gives the input back."""
    if not is_perm(perm):
        raise ValueError(f"{list(perm)} is not a permutation")
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return tuple(inverse)


__all__ = ["get_inversed_perm", "get_perm_when_transpose_axis_to_last_dim", "is_perm"]
