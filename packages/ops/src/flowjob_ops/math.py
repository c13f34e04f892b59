"""``flow.math``: elementwise arithmetic, reductions, matmul and activations.

Binary functions broadcast like numpy; either side may be a Python number, which becomes a
scalar op (``x * 2.0`` is one ``scalar_mul`` node), never a promotion of the blob's dtype.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, ShapeError, apply

from flowjob_ops.comparisons import equal, greater, greater_equal, less, less_equal, not_equal
from flowjob_ops.defs.common import build_error, check_scalar

__all__ = [
    "abs", "add", "add_n", "argmax", "divide", "equal", "exp", "gelu", "greater", "greater_equal", "less",
    "less_equal", "log", "matmul", "maximum", "minimum", "multiply", "negative", "not_equal", "pow", "reciprocal",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_sum", "sigmoid", "sign", "sqrt", "square", "subtract", "tanh",
]

Operand = Blob | float | int


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _scalar_or_binary(op: str, x: Operand, y: Operand, name: str | None, *, with_scalar: str,
                      scalar_first: str, transform: Any = lambda s: s) -> Blob:
    """``op(x, y)`` for two blobs, else the scalar op for ``blob op number`` / ``number op blob``."""
    if isinstance(x, Blob) and isinstance(y, Blob):
        return apply(op, [x, y], name=name)
    if isinstance(x, Blob) and _is_number(y):
        _check_scalar(op, y, x)
        return apply(with_scalar, [x], {"scalar": transform(y)}, name=name)
    if _is_number(x) and isinstance(y, Blob):
        _check_scalar(op, x, y)
        return apply(scalar_first, [y], {"scalar": x}, name=name)
    raise TypeError(
        f"flow.math.{op} needs blobs or a blob and a Python number, got {type(x).__name__} and "
        f"{type(y).__name__} (turn arrays into blobs with flow.constant)")


def _check_scalar(op: str, value: Any, blob: Blob) -> None:
    # scalar_mul is core's op and takes any number: check here that the blob's dtype can hold it
    try:
        check_scalar(value, blob.dtype, op)
    except ShapeError as exc:
        raise build_error(f"flow.math.{op}", str(exc)) from None


def add(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """x + y, elementwise with broadcasting.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: the op name; default ``Add_<n>`` (``ScalarAdd_<n>`` with a number).

    Returns:
        A blob of the broadcast shape.
    """
    return _scalar_or_binary("add", x, y, name, with_scalar="scalar_add", scalar_first="scalar_add")


def subtract(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """x - y, elementwise with broadcasting.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: the op name; default ``Subtract_<n>``.

    Returns:
        A blob of the broadcast shape.
    """
    return _scalar_or_binary("subtract", x, y, name, with_scalar="scalar_add", scalar_first="scalar_rsub",
                             transform=lambda s: -s)


def multiply(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """x * y, elementwise with broadcasting.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: the op name; default ``Multiply_<n>`` (``ScalarMul_<n>`` with a number).

    Returns:
        A blob of the broadcast shape.
    """
    return _scalar_or_binary("multiply", x, y, name, with_scalar="scalar_mul", scalar_first="scalar_mul")


def divide(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """x / y, elementwise with broadcasting (floating blobs).

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: the op name; default ``Divide_<n>`` (``ScalarDiv_<n>`` with a number).

    Returns:
        A blob of the broadcast shape.
    """
    return _scalar_or_binary("divide", x, y, name, with_scalar="scalar_div", scalar_first="scalar_rdiv")


def maximum(x: Blob, y: Blob, name: str | None = None) -> Blob:
    """Elementwise maximum with broadcasting; at ties the gradient goes to ``x``.

    Args:
        x: a blob.
        y: a blob of the same dtype, broadcastable with x.
        name: the op name; default ``Maximum_<n>``.

    Returns:
        A blob of the broadcast shape.
    """
    return apply("maximum", [x, y], name=name)


def minimum(x: Blob, y: Blob, name: str | None = None) -> Blob:
    """Elementwise minimum with broadcasting; at ties the gradient goes to ``x``.

    Args:
        x: a blob.
        y: a blob of the same dtype, broadcastable with x.
        name: the op name; default ``Minimum_<n>``.

    Returns:
        A blob of the broadcast shape.
    """
    return apply("minimum", [x, y], name=name)


def pow(x: Blob, y: float | int, name: str | None = None) -> Blob:  # noqa: A001 - legacy name
    """x ** y for a Python number ``y`` (floating blobs).

    Args:
        x: a floating blob.
        y: the exponent, a Python number.
        name: the op name; default ``ScalarPow_<n>``.

    Returns:
        A blob like x.
    """
    if not (isinstance(x, Blob) and _is_number(y)):
        raise TypeError(f"flow.math.pow needs a blob and a Python number exponent, got {type(x).__name__} "
                        f"and {type(y).__name__}")
    return apply("scalar_pow", [x], {"scalar": y}, name=name)


def add_n(inputs: Sequence[Blob], name: str | None = None) -> Blob:
    """The sum of blobs of one shape and dtype.

    Args:
        inputs: a non-empty list of blobs.
        name: the op name; default ``AddN_<n>``.

    Returns:
        A blob like each input.
    """
    return apply("add_n", list(inputs), name=name)


def _unary(op: str, doc: str) -> Any:
    def fn(x: Blob, name: str | None = None) -> Blob:
        return apply(op, [x], name=name)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{doc}, elementwise.

    Args:
        x: a blob.
        name: the op name; default from the op's legacy prefix.

    Returns:
        A blob like x.
    """
    return fn


negative = _unary("negative", "-x")
square = _unary("square", "x * x")
sqrt = _unary("sqrt", "The square root of x")
exp = _unary("exp", "e ** x")
log = _unary("log", "The natural logarithm of x")
abs = _unary("abs", "|x|, with gradient sign(x)")  # noqa: A001 - legacy name
reciprocal = _unary("reciprocal", "1 / x")
sign = _unary("sign", "-1, 0 or 1 by the sign of x (its gradient is zero)")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x))")
tanh = _unary("tanh", "The hyperbolic tangent of x")
gelu = _unary("gelu", "x * Phi(x), Phi the standard normal CDF (the exact erf form)")


def _reduce(op: str, what: str) -> Any:
    def fn(input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
           name: str | None = None) -> Blob:
        axes = None if axis is None else (int(axis) if isinstance(axis, numbers.Integral) else
                                          tuple(int(a) for a in axis))
        return apply(op, [input_tensor], {"axis": axes, "keepdims": bool(keepdims)}, name=name)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""The {what} of the elements along ``axis``.

    Args:
        input_tensor: a blob.
        axis: None (all axes), an int or a list of ints; negative counts from the end.
        keepdims: keep the reduced axes with size 1.
        name: the op name; default from the op's legacy prefix.

    Returns:
        The reduced blob.
    """
    return fn


reduce_sum = _reduce("reduce_sum", "sum")
reduce_mean = _reduce("reduce_mean", "mean")
reduce_max = _reduce("reduce_max", "maximum (gradient split evenly among ties)")
reduce_min = _reduce("reduce_min", "minimum (gradient split evenly among ties)")


def matmul(a: Blob, b: Blob, transpose_a: bool = False, transpose_b: bool = False, name: str | None = None) -> Blob:
    """Matrix product op(a) @ op(b); rank >= 3 inputs multiply batches (batch axes broadcast).

    Args:
        a: a blob of rank >= 2.
        b: a blob of rank >= 2 and a's dtype.
        transpose_a: use a with its last two axes swapped.
        transpose_b: use b with its last two axes swapped.
        name: the op name; default ``Matmul_<n>``.

    Returns:
        A blob of shape batch + (rows of op(a), columns of op(b)).
    """
    return apply("matmul", [a, b], {"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)}, name=name)


def argmax(input: Blob, axis: int = -1, name: str | None = None) -> Blob:  # noqa: A002 - legacy name
    """The index (int32) of the first maximum along ``axis``.

    Args:
        input: a blob of rank >= 1.
        axis: the axis to search (default the last).
        name: the op name; default ``Argmax_<n>``.

    Returns:
        An int32 blob without that axis.
    """
    return apply("argmax", [input], {"axis": -1 if axis is None else axis}, name=name)
