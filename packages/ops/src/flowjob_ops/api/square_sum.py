"""``flow.experimental.square_sum``: the sum of a blob's squared elements (legacy v0.4)."""
from __future__ import annotations

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error

__all__ = ["square_sum"]


def square_sum(x: Blob, name: str | None = None) -> Blob:
    """The sum of the squares of every element of ``x``, as a (1,) blob of x's floating type.

    Args:
        x: a floating blob of any shape.
        name: the op name; default ``SquareSum_<n>``.
    """
    if not isinstance(x, Blob):
        raise build_error("flow.experimental.square_sum", f"x must be a blob, got {type(x).__name__}")
    return apply("square_sum", [x], {}, name=name)
