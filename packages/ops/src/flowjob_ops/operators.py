"""The Python operators on symbolic blobs (``x + y``, ``2.0 * x``, ``-x``, ``a @ b``, ``x ** 2``, ``x[0, 1:3]``,
``x > 0``): each is a public function of ``flowjob_ops.api``; the plugin registers them with
``registry.add_operator``."""
from __future__ import annotations

import numbers
from typing import Any, Callable

from flowjob_core import Blob

from flowjob_ops.api import comparisons, indexing, math


def _comparison(compare: Callable[..., Blob]) -> Callable[[Blob, Any], Any]:
    def method(blob: Blob, other: Any) -> Any:
        # anything but a blob or a number: NotImplemented, so ``blob == None`` is False and
        # ``blob < "a"`` a TypeError, as Python's protocol has it (not an error from inside an op)
        if not isinstance(other, Blob) and (isinstance(other, bool) or not isinstance(other, numbers.Number)):
            return NotImplemented
        return compare(blob, other)

    method.__name__ = compare.__name__
    return method


OPERATORS: dict[str, Callable[..., Any]] = {
    "__add__": math.add,
    "__radd__": lambda a, b: math.add(b, a),
    "__sub__": math.subtract,
    "__rsub__": lambda a, b: math.subtract(b, a),
    "__mul__": math.multiply,
    "__rmul__": lambda a, b: math.multiply(b, a),
    "__truediv__": math.divide,
    "__rtruediv__": lambda a, b: math.divide(b, a),
    "__neg__": math.negative,
    "__pow__": math.pow,
    "__rpow__": lambda a, b: math.pow(b, a),
    "__mod__": math.mod,  # legacy Blob % (floor modulo); legacy had no // on blobs
    # ``2 % x`` and ``2.0 ** x``: legacy v0.4's blobs lacked these reflected forms (a TypeError there)
    "__rmod__": lambda a, b: math.mod(b, a),
    "__matmul__": math.matmul,
    "__rmatmul__": lambda a, b: math.matmul(b, a),
    "__getitem__": indexing.getitem,
    # Python tries the reflected comparison for ``0 < x``
    "__gt__": _comparison(comparisons.greater), "__ge__": _comparison(comparisons.greater_equal),
    "__lt__": _comparison(comparisons.less), "__le__": _comparison(comparisons.less_equal),
    "__eq__": _comparison(comparisons.equal), "__ne__": _comparison(comparisons.not_equal),
}
"""Blob operator name -> the function it calls."""
