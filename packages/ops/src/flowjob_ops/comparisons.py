"""``flow.math.greater`` & co. (re-exported by ``flowjob_ops.math``) and the Blob comparison operators.

Each compares with numpy broadcasting and gives an int8 blob (1 true, 0 false), as legacy OneFlow
does; no gradient flows through a comparison. Either side may be a Python number: it becomes a
0-d constant of the blob's dtype (``x > 0`` compares float32 with float32).
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

from flowjob_core import Blob, ShapeError, apply

from flowjob_ops.records.common import build_error, check_scalar

__all__ = ["equal", "greater", "greater_equal", "less", "less_equal", "not_equal"]

Operand = Blob | float | int


def _as_blob(op: str, value: Any, like: Blob) -> Blob:
    """A Python number as a 0-d constant of ``like``'s dtype (it broadcasts to any shape)."""
    if isinstance(value, Blob):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"flow.math.{op} needs blobs or a blob and a Python number, got {type(value).__name__} "
                        f"(turn arrays into blobs with flow.constant)")
    try:
        check_scalar(value, like.dtype, op)  # 0.5 against an int blob would compare with 0
    except ShapeError as exc:
        raise build_error(f"flow.math.{op}", str(exc)) from None
    return apply("constant", [], {"value": value, "dtype": like.dtype, "shape": ()})


def _comparison(op: str, symbol: str) -> Callable[..., Blob]:
    def compare(x: Operand, y: Operand, name: str | None = None) -> Blob:
        if not isinstance(x, Blob) and not isinstance(y, Blob):
            raise TypeError(f"flow.math.{op} needs at least one blob, got {type(x).__name__} and "
                            f"{type(y).__name__}")
        like = x if isinstance(x, Blob) else y
        assert isinstance(like, Blob)  # one of them is
        return apply(op, [_as_blob(op, x, like), _as_blob(op, y, like)], name=name)

    compare.__name__ = compare.__qualname__ = op
    compare.__doc__ = f"""x {symbol} y, elementwise with broadcasting, as int8 (1 or 0); not differentiable.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob; both blobs of one dtype).
        name: the op name; default ``{''.join(p.capitalize() for p in op.split('_'))}_<n>``.

    Returns:
        An int8 blob of the broadcast shape.
    """
    return compare


greater = _comparison("greater", ">")
greater_equal = _comparison("greater_equal", ">=")
less = _comparison("less", "<")
less_equal = _comparison("less_equal", "<=")
equal = _comparison("equal", "==")
not_equal = _comparison("not_equal", "!=")

def _operator(compare: Callable[..., Blob]) -> Callable[[Blob, Any], Any]:
    def method(blob: Blob, other: Any) -> Any:
        # anything but a blob or a number: NotImplemented, so ``blob == None`` is False and
        # ``blob < "a"`` a TypeError, as Python's protocol has it (not an error from inside an op)
        if not isinstance(other, Blob) and (isinstance(other, bool) or not isinstance(other, numbers.Number)):
            return NotImplemented
        return compare(blob, other)

    method.__name__ = compare.__name__
    return method


OPERATORS: dict[str, Callable[[Blob, Any], Any]] = {
    "__gt__": _operator(greater), "__ge__": _operator(greater_equal), "__lt__": _operator(less),
    "__le__": _operator(less_equal), "__eq__": _operator(equal), "__ne__": _operator(not_equal),
}
"""The Blob comparison operators (``x > 0``); Python tries the reflected one for ``0 < x``."""
