"""``flow.math.greater`` & co.: comparisons with numpy broadcasting giving an int8 blob (1 true, 0 false),
as legacy OneFlow does; no gradient flows through a comparison. Either side may be a Python number: it
becomes a 0-d constant of the blob's dtype (``x > 0`` compares float32 with float32). The Blob comparison
operators (``x > 0``) call these functions (``flowjob_ops.plugin``)."""
from __future__ import annotations

from typing import Callable

from flowjob_core import Blob, apply

from flowjob_ops.api._common import number_as_blob, restated


__all__ = ["equal", "greater", "greater_equal", "less", "less_equal", "not_equal"]


Operand = Blob | float | int


def _comparison(op: str) -> Callable[..., Blob]:
    def compare(x: Operand, y: Operand, name: str | None = None) -> Blob:
        if not isinstance(x, Blob) and not isinstance(y, Blob):
            raise TypeError(f"flow.math.{op} needs at least one blob, got {type(x).__name__} and "
                            f"{type(y).__name__}")
        like = x if isinstance(x, Blob) else y
        assert isinstance(like, Blob)  # one of them is
        return apply(op, [number_as_blob(op, x, like), number_as_blob(op, y, like)], name=name)

    compare.__name__ = compare.__qualname__ = op
    compare.__doc__ = f"""{restated(op, '; not differentiable.')}

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob; both blobs of one dtype).
        name: the op name; default ``{''.join(p.capitalize() for p in op.split('_'))}_<n>``.

    Returns:
        An int8 blob of the broadcast shape.
    """
    return compare


greater = _comparison("greater")


greater_equal = _comparison("greater_equal")


less = _comparison("less")


less_equal = _comparison("less_equal")


equal = _comparison("equal")


not_equal = _comparison("not_equal")
