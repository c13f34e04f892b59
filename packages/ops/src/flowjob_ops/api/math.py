"""``flow.math``'s elementwise functions: arithmetic, the unary functions, logical ops, clip_by_value,
matmul, polyval and the gradient functions legacy exported (gelu_grad, sigmoid_grad).

Binary functions broadcast like numpy; either side may be a Python number, which becomes a
scalar op (``x * 2.0`` is one ``scalar_mul`` node), never a promotion of the blob's dtype.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, ShapeError, apply

from flowjob_ops.api._common import build_error, number_as_blob, op_name, restated, unary_function
from flowjob_ops.records.common import check_scalar


NAMESPACES = {
    "flow.math": ["abs", "acos", "acosh", "add", "add_n", "asin", "asinh", "atan", "atan2", "atanh", "ceil",
                  "clip_by_value", "cos", "cosh", "divide", "erf", "erfc", "exp", "expm1", "floor", "floordiv",
                  "gelu", "gelu_grad", "lgamma", "log", "log1p", "log_sigmoid", "logical_and", "logical_not",
                  "logical_or", "logical_xor", "matmul", "maximum", "minimum", "mod", "multiply", "negative",
                  "polyval", "pow", "reciprocal", "reciprocal_no_nan", "relu", "rint", "round", "rsqrt", "sigmoid",
                  "sigmoid_grad", "sigmoid_v2", "sign", "sin", "sinh", "softplus", "sqrt", "square",
                  "squared_difference", "subtract", "tan", "tanh", "tanh_v2", "xdivy", "xlogy"],
    "flow": ["clamp", "clip", "clip_by_scalar", "clip_by_value", "matmul"],
    "flow.linalg": ["matmul"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


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
    """x / y, elementwise with broadcasting; on integer blobs the quotient is truncated toward zero.

    Integer division is legacy's C ``/`` (-7 / 2 is -3; op ``int_divide``, no gradient); a zero
    divisor fails the step with an error naming the op, or the build when it is a Python 0.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: the op name; default ``Divide_<n>`` (``ScalarDiv_<n>`` with a number on floating blobs).

    Returns:
        A blob of the broadcast shape.
    """
    like = x if isinstance(x, Blob) else y
    if isinstance(like, Blob) and like.dtype.kind in "iu" and (isinstance(y, Blob) or _is_number(y)):
        if not isinstance(y, Blob) and y == 0:
            raise build_error("flow.math.divide", f"integer division of {like.lbn!r} by the number 0")
        return apply("int_divide", [number_as_blob("divide", x, like), number_as_blob("divide", y, like)],
                     name=name)
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


def pow(x: Operand, y: Operand, name: str | None = None) -> Blob:  # noqa: A001 - legacy name
    """x ** y, elementwise with broadcasting (floating blobs); also ``x ** y`` on blobs.

    Args:
        x: a floating blob (or a Python number when y is a blob).
        y: the exponent: a Python number (one ``scalar_pow`` node) or a blob of x's dtype.
        name: the op name; default ``ScalarPow_<n>`` with a number exponent, ``Pow_<n>`` with a blob.

    Returns:
        A blob of the broadcast shape.
    """
    if isinstance(x, Blob) and _is_number(y):
        return apply("scalar_pow", [x], {"scalar": y}, name=name)
    return _blobs_or_numbers("pow", x, y, name)


def _blobs_or_numbers(op: str, x: Operand, y: Operand, name: str | None) -> Blob:
    """``op(x, y)`` on two blobs; a Python number on one side becomes a 0-d constant of the other's dtype."""
    if not isinstance(x, Blob) and not isinstance(y, Blob):
        raise TypeError(f"flow.math.{op} needs at least one blob, got {type(x).__name__} and {type(y).__name__}")
    like = x if isinstance(x, Blob) else y
    assert isinstance(like, Blob)  # one of them is
    return apply(op, [number_as_blob(op, x, like), number_as_blob(op, y, like)], name=name)


def mod(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """Floor modulo x - floor(x / y) * y with broadcasting: the result has y's sign, as Python's ``%``
    (also ``x % y`` on blobs). Integer or floating blobs; not differentiable.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob; both blobs of one dtype).
        name: the op name; default ``broadcast_floor_mod_<n>``.

    Returns:
        A blob of the broadcast shape.
    """
    return _blobs_or_numbers("mod", x, y, name)


def _binary_doc(fn: Any, what: str, prefix: str) -> Any:
    fn.__doc__ = f"""{what}

    Args:
        x: a floating blob (or a Python number when y is a blob).
        y: a blob of x's dtype, broadcastable with x (or a Python number).
        name: the op name; default ``{prefix}_<n>``.

    Returns:
        A blob of the broadcast shape.
    """
    return fn


def floordiv(x: Operand, y: Operand, name: str | None = None) -> Blob:
    return _blobs_or_numbers("floordiv", x, y, name)


def atan2(x: Operand, y: Operand, name: str | None = None) -> Blob:
    return _blobs_or_numbers("atan2", x, y, name)


def xdivy(x: Operand, y: Operand, name: str | None = None) -> Blob:
    return _blobs_or_numbers("xdivy", x, y, name)


def xlogy(x: Operand, y: Operand, name: str | None = None) -> Blob:
    return _blobs_or_numbers("xlogy", x, y, name)


def squared_difference(x: Operand, y: Operand, name: str | None = None) -> Blob:
    """(x - y) ** 2, elementwise with broadcasting: a ``subtract`` node, then a ``square`` node.

    Args:
        x: a blob or a Python number.
        y: a blob or a Python number (at least one of x, y is a blob).
        name: with a name, the nodes are ``<name>_subtract`` and ``<name>_square`` (as legacy names them).

    Returns:
        A blob of the broadcast shape.
    """
    sub_name, square_name = (None, None) if name is None else (f"{name}_subtract", f"{name}_square")
    return apply("square", [subtract(x, y, sub_name)], name=square_name)


def _logical(op: str, prefix: str) -> Any:
    def fn(x: Blob, y: Blob, name: str | None = None) -> Blob:
        if not (isinstance(x, Blob) and isinstance(y, Blob)):
            raise TypeError(f"flow.math.{op} needs two blobs, got {type(x).__name__} and {type(y).__name__}")
        return apply(op, [x, y], name=name)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{restated(op, '. Not differentiable.')}

    Args:
        x: a blob.
        y: a blob of x's dtype, broadcastable with x.
        name: the op name; default ``{prefix}_<n>``.

    Returns:
        An int8 blob of the broadcast shape.
    """
    return fn


logical_and = _logical("logical_and", "broadcast_logical_and")


logical_or = _logical("logical_or", "broadcast_logical_or")


logical_xor = _logical("logical_xor", "broadcast_logical_xor")


def logical_not(x: Blob, name: str | None = None) -> Blob:
    """not x, elementwise, as int8 (1 where x == 0, else 0). Not differentiable.

    Args:
        x: a numeric or bool blob.
        name: the op name; default ``logical_not_<n>``.

    Returns:
        An int8 blob of x's shape.
    """
    if not isinstance(x, Blob):
        raise TypeError(f"flow.math.logical_not needs a blob, got {type(x).__name__}")
    return apply("logical_not", [x], name=name)


def add_n(inputs: Sequence[Blob], name: str | None = None) -> Blob:
    """The sum of blobs of one shape and dtype.

    Args:
        inputs: a non-empty list of blobs.
        name: the op name; default ``AddN_<n>``.

    Returns:
        A blob like each input.
    """
    return apply("add_n", list(inputs), name=name)


negative = unary_function("negative", __name__)


square = unary_function("square", __name__)


sqrt = unary_function("sqrt", __name__)


exp = unary_function("exp", __name__)


log = unary_function("log", __name__)


abs = unary_function("abs", __name__)  # noqa: A001 - legacy name


reciprocal = unary_function("reciprocal", __name__)


sign = unary_function("sign", __name__)


sigmoid = unary_function("sigmoid", __name__)


tanh = unary_function("tanh", __name__)


gelu = unary_function("gelu", __name__)


sin = unary_function("sin", __name__)


cos = unary_function("cos", __name__)


tan = unary_function("tan", __name__)


asin = unary_function("asin", __name__)


acos = unary_function("acos", __name__)


atan = unary_function("atan", __name__)


sinh = unary_function("sinh", __name__)


cosh = unary_function("cosh", __name__)


asinh = unary_function("asinh", __name__)


acosh = unary_function("acosh", __name__)


atanh = unary_function("atanh", __name__)


erf = unary_function("erf", __name__)


erfc = unary_function("erfc", __name__)


lgamma = unary_function("lgamma", __name__)


rint = unary_function("rint", __name__)


round = unary_function("round", __name__)  # noqa: A001 - legacy name


floor = unary_function("floor", __name__)


ceil = unary_function("ceil", __name__)


rsqrt = unary_function("rsqrt", __name__)


softplus = unary_function("softplus", __name__)


log1p = unary_function("log1p", __name__)


expm1 = unary_function("expm1", __name__)


reciprocal_no_nan = unary_function("reciprocal_no_nan", __name__)


log_sigmoid = unary_function("log_sigmoid", __name__)


relu = unary_function("relu", __name__)


def _renamed(op: str, legacy: str) -> Any:
    """Legacy's ``*_v2`` ops compute what ``op`` does; only their default node name differs."""
    def fn(x: Blob, name: str | None = None) -> Blob:
        return apply(op, [x], name=op_name(name, legacy))

    fn.__name__ = fn.__qualname__ = legacy
    fn.__doc__ = f"""{restated(op, f', elementwise (the ``{op}`` op; default name ``{legacy}_<n>``).')}

    Args:
        x: a floating blob.
        name: the op name.

    Returns:
        A blob like x.
    """
    return fn


sigmoid_v2 = _renamed("sigmoid", "sigmoid_v2")


tanh_v2 = _renamed("tanh", "tanh_v2")


def clip_by_value(values: Blob, min_value: float | None = None, max_value: float | None = None,
                  name: str | None = None) -> Blob:
    """``values`` limited to [min_value, max_value].

    Args:
        values: a blob.
        min_value: the lower bound, or None.
        max_value: the upper bound, or None.
        name: the op name; default ``ClipByValue_<n>``.

    Returns:
        A blob like values; the gradient passes where min_value <= x <= max_value.
    """
    if min_value is None and max_value is None:
        raise build_error("flow.clip_by_value", "min_value and max_value cannot both be None")
    if isinstance(values, Blob) and values.dtype.kind in "iu":
        # legacy passed integer blobs int(bound): a fractional bound is truncated toward zero
        min_value, max_value = (b if b is None or isinstance(b, bool) or not isinstance(b, numbers.Real)
                                else int(b) for b in (min_value, max_value))
    return apply("clip_by_value", [values], {"min_value": min_value, "max_value": max_value}, name=name)


clip = clamp = clip_by_scalar = clip_by_value  # legacy exported these names for the same function


def gelu_grad(x: Blob, dy: Blob, name: str | None = None) -> Blob:
    """dy * gelu'(x) = dy * (Phi(x) + x phi(x)).

    Args:
        x: gelu's input.
        dy: the gradient of gelu's output, shaped like x.
        name: the op name; default ``GeluGrad_<n>``.
    """
    return apply("gelu_grad", [x, dy], name=name)


def sigmoid_grad(y: Blob, dy: Blob, name: str | None = None) -> Blob:
    """dy * y * (1 - y), from sigmoid's output y.

    Args:
        y: sigmoid's output.
        dy: its gradient, shaped like y.
        name: the op name; default ``SigmoidGrad_<n>``.
    """
    return apply("sigmoid_grad", [y, dy], name=name)


def _number(what: str, arg: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"{arg} must be a Python number, got {value!r}")
    return value


def polyval(coeffs: Sequence[float | int], x: Blob, name: str | None = None) -> Blob:
    """The polynomial ``coeffs[0] * x**(n-1) + ... + coeffs[-1]`` at every element of ``x``.

    As in legacy, Horner's rule in graph nodes: ``p = zeros_like(x)`` (named ``name``), then
    ``p = c + p * x`` for each coefficient, so the gradient comes from those nodes.

    Args:
        coeffs: a list or tuple of Python numbers, highest power first; empty gives zeros.
        x: a blob.
        name: the name of the zeros node; default ``Polyval_<n>``.
    """
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"flow.math.polyval: coeffs must be a list or tuple, got {type(coeffs).__name__}")
    for c in coeffs:
        _number("flow.math.polyval", "each of coeffs", c)
    p = apply("zeros_like", [x], name=op_name(name, "Polyval"))
    for c in coeffs:
        p = add(c, multiply(p, x))
    return p


def matmul(a: Blob, b: Blob, transpose_a: bool = False, transpose_b: bool = False, alpha: float = 1.0,
           name: str | None = None) -> Blob:
    """Matrix product alpha * op(a) @ op(b); rank >= 3 inputs multiply batches (batch axes broadcast).

    Args:
        a: a blob of rank >= 2.
        b: a blob of rank >= 2 and a's dtype.
        transpose_a: use a with its last two axes swapped.
        transpose_b: use b with its last two axes swapped.
        alpha: a number the product is multiplied by (legacy v0.4's attribute); another value than 1 adds
            a ``scalar_mul`` node ``<name>-alpha`` after the product.
        name: the op name; default ``Matmul_<n>``.

    Returns:
        A blob of shape batch + (rows of op(a), columns of op(b)).
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise build_error("flow.matmul", f"alpha must be a number, got {alpha!r}")
    attrs = {"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)}
    if float(alpha) == 1.0:
        return apply("matmul", [a, b], attrs, name=name)
    node = op_name(name, "Matmul")
    product = apply("matmul", [a, b], attrs, name=node)
    return apply("scalar_mul", [product], {"scalar": float(alpha)}, name=f"{node}-alpha")
