"""Elementwise ops as ONNX: the trigonometric and hyperbolic functions, rounding, the special functions ONNX
composes (``log1p``, ``expm1``, ``erfc``, ``log_sigmoid``), comparisons and logic (int8 results, as the
records give), the binary math ops (``mod``'s sign, ``atan2``'s quadrants, ``xdivy``/``xlogy`` at 0) and the
activations ONNX writes as short compositions.

Comparisons that older opsets lack (``LessOrEqual`` before 12, ``Equal`` on floats before 11) are composed
from the ones they have, so the same model runs at opset 10.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_emitter import Emitter

Converter = Callable[[Emitter, Node], None]
BOOL = 9  # onnx.TensorProto.BOOL


def _simple(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        e.add(op_type, list(node.inputs), list(node.outputs), node.name)

    return convert


def _const(e: Emitter, value: float, like: str, stem: str) -> str:
    return e.constant(value, f"{stem}/const", e.dtype(like))


def _composed(build: Callable[[Emitter, str, str], str]) -> Converter:
    """A unary op as ``build(e, x, stem)``, its result renamed to the op's output."""

    def convert(e: Emitter, node: Node) -> None:
        e.add("Identity", [build(e, node.inputs[0], node.name)], list(node.outputs), node.name)

    return convert


def _log1p(e: Emitter, x: str, stem: str) -> str:
    return e.add("Log", [e.add("Add", [x, _const(e, 1.0, x, stem)], stem=stem)], stem=stem)


def _expm1(e: Emitter, x: str, stem: str) -> str:
    return e.add("Sub", [e.add("Exp", [x], stem=stem), _const(e, 1.0, x, stem)], stem=stem)


def _erfc(e: Emitter, x: str, stem: str) -> str:
    return e.add("Sub", [_const(e, 1.0, x, stem), e.add("Erf", [x], stem=stem)], stem=stem)


def _log_sigmoid(e: Emitter, x: str, stem: str) -> str:
    return e.add("Neg", [e.add("Softplus", [e.add("Neg", [x], stem=stem)], stem=stem)], stem=stem)


def _mish(e: Emitter, x: str, stem: str) -> str:
    return e.add("Mul", [x, e.add("Tanh", [e.add("Softplus", [x], stem=stem)], stem=stem)], stem=stem)


def _hardsigmoid(e: Emitter, x: str, stem: str) -> str:
    return e.add("HardSigmoid", [x], stem=stem, alpha=1.0 / 6.0, beta=0.5)


def _hardswish(e: Emitter, x: str, stem: str) -> str:
    return e.add("Mul", [x, _hardsigmoid(e, x, stem)], stem=stem)


def round_half_even(e: Emitter, x: str, stem: str, dtype: Any = None) -> str:
    """The nearest integer, halves to even (numpy's rint): ``Round`` from opset 11; before, floor(x) moved up
    where the fraction is over a half, or a half above an odd floor."""
    if e.opset >= 11:
        return e.add("Round", [x], stem=stem)
    dtype = np.dtype(dtype if dtype is not None else e.dtype(x))
    c = lambda v: e.constant(v, f"{stem}/const", dtype)  # noqa: E731 - a constant of x's dtype
    low = e.add("Floor", [x], stem=stem)
    fraction = e.add("Sub", [x, low], stem=stem)
    odd = e.add("Not", [equal(e, e.add("Mod", [low, c(2.0)], stem=stem, fmod=1), c(0.0), stem, dtype)], stem=stem)
    half = equal(e, fraction, c(0.5), stem, dtype)
    up = e.add("Or", [e.add("Greater", [fraction, c(0.5)], stem=stem), e.add("And", [half, odd], stem=stem)],
               stem=stem)
    return e.add("Where", [up, e.add("Add", [low, c(1.0)], stem=stem), low], stem=stem)


def _round(e: Emitter, x: str, stem: str) -> str:
    return round_half_even(e, x, stem)


def _silu(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    beta = float(node.attrs.get("beta", 1.0))
    scaled = x if beta == 1.0 else e.add("Mul", [x, _const(e, beta, x, node.name)], stem=node.name)
    e.add("Mul", [x, e.add("Sigmoid", [scaled], stem=node.name)], list(node.outputs), node.name)


def _hardtanh(e: Emitter, node: Node) -> None:
    e.clip(node.inputs[0], node.attrs.get("min_val", -1.0), node.attrs.get("max_val", 1.0), list(node.outputs),
           node.name)


def _prelu(e: Emitter, node: Node) -> None:
    """alpha is shaped x.shape[1:]: ONNX's PRelu broadcasts it from the right."""
    e.add("PRelu", list(node.inputs), list(node.outputs), node.name)


def _reciprocal_no_nan(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    zero = _const(e, 0.0, x, node.name)
    e.add("Where", [equal(e, x, zero, node.name), zero, e.add("Reciprocal", [x], stem=node.name)], list(node.outputs),
          node.name)


# comparisons and logic ------------------------------------------------------------------------------
def equal(e: Emitter, a: str, b: str, stem: str, dtype: Any = None) -> str:
    """a == b as a bool tensor (``dtype``: the operands', where ``a`` is no value of the job); before opset 11
    ``Equal`` takes integers only, so floats compare by neither less nor greater."""
    if e.opset >= 11 or np.dtype(dtype if dtype is not None else e.dtype(a)).kind in "iub":
        return e.add("Equal", [a, b], stem=stem)
    return e.add("Not", [e.add("Or", [e.add("Less", [a, b], stem=stem), e.add("Greater", [a, b], stem=stem)],
                               stem=stem)], stem=stem)


def _compare(kind: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        a, b = node.inputs
        stem = node.name
        if kind == "less":
            result = e.add("Less", [a, b], stem=stem)
        elif kind == "greater":
            result = e.add("Greater", [a, b], stem=stem)
        elif kind in ("less_equal", "greater_equal"):
            if e.opset >= 12:
                result = e.add("LessOrEqual" if kind == "less_equal" else "GreaterOrEqual", [a, b], stem=stem)
            else:  # not the strict opposite (the same for every non-NaN value)
                result = e.add("Not", [e.add("Greater" if kind == "less_equal" else "Less", [a, b], stem=stem)],
                               stem=stem)
        elif kind == "equal":
            result = equal(e, a, b, stem)
        else:
            result = e.add("Not", [equal(e, a, b, stem)], stem=stem)
        e.add("Cast", [result], list(node.outputs), stem, to=e.tensor_type(e.dtype(node.outputs[0])))

    return convert


def as_bool(e: Emitter, x: str, stem: str) -> str:
    return x if e.dtype(x) == np.bool_ else e.add("Cast", [x], stem=stem, to=BOOL)  # nonzero is true


def _logical(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        operands = [as_bool(e, x, node.name) for x in node.inputs]
        result = e.add(op_type, operands, stem=node.name)
        e.add("Cast", [result], list(node.outputs), node.name, to=e.tensor_type(e.dtype(node.outputs[0])))

    return convert


# binary math -----------------------------------------------------------------------------------------
def _mod(e: Emitter, node: Node) -> None:
    """Python's remainder (the divisor's sign): C's fmod moved by the divisor where the signs differ."""
    x, y = node.inputs
    if e.dtype(x).kind in "iu":
        e.add("Mod", [x, y], list(node.outputs), node.name, fmod=0)  # integer Mod already takes y's sign
        return
    r = e.add("Mod", [x, y], stem=node.name, fmod=1)
    zero = _const(e, 0.0, x, node.name)
    moved = e.add("And", [e.add("Not", [equal(e, r, zero, node.name, e.dtype(x))], stem=node.name),
                          e.add("Less", [e.add("Mul", [r, y], stem=node.name), zero], stem=node.name)],
                  stem=node.name)
    e.add("Where", [moved, e.add("Add", [r, y], stem=node.name), r], list(node.outputs), node.name)


def _floordiv(e: Emitter, node: Node) -> None:
    e.add("Floor", [e.add("Div", list(node.inputs), stem=node.name)], list(node.outputs), node.name)


def _int_divide(e: Emitter, node: Node) -> None:
    """Integer Div truncates toward zero, as C; it takes 32 and 64-bit integers only (narrower ones go
    through int32 and back)."""
    dtype = e.dtype(node.outputs[0])
    if dtype.itemsize >= 4:
        e.add("Div", list(node.inputs), list(node.outputs), node.name)
        return
    wide = [e.add("Cast", [x], stem=node.name, to=e.tensor_type(np.int32)) for x in node.inputs]
    e.add("Cast", [e.add("Div", wide, stem=node.name)], list(node.outputs), node.name, to=e.tensor_type(dtype))


def _atan2(e: Emitter, node: Node) -> None:
    """atan(y / x), moved by pi toward y's sign where x < 0; +-pi/2 by y's sign where x is 0 (either zero)."""
    y, x = node.inputs
    stem = node.name
    zero = _const(e, 0.0, x, stem)
    ratio = e.add("Atan", [e.add("Div", [y, x], stem=stem)], stem=stem)
    upright = e.add("Mul", [e.add("Sign", [y], stem=stem), _const(e, np.pi / 2, x, stem)], stem=stem)
    base = e.add("Where", [equal(e, x, zero, stem), upright, ratio], stem=stem)
    half_turn = e.add("Where", [e.add("Less", [y, zero], stem=stem), _const(e, -np.pi, x, stem),
                                _const(e, np.pi, x, stem)], stem=stem)
    e.add("Where", [e.add("Less", [x, zero], stem=stem), e.add("Add", [base, half_turn], stem=stem), base],
          list(node.outputs), stem)


def _zero_where_x_is_zero(op: Callable[[Emitter, str, str, str], str]) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        x, y = node.inputs
        zero = _const(e, 0.0, x, node.name)
        e.add("Where", [equal(e, x, zero, node.name), zero, op(e, x, y, node.name)], list(node.outputs), node.name)

    return convert


CONVERTERS: dict[str, Converter] = {
    "tan": _simple("Tan"), "asin": _simple("Asin"), "acos": _simple("Acos"), "atan": _simple("Atan"),
    "sinh": _simple("Sinh"), "cosh": _simple("Cosh"), "asinh": _simple("Asinh"), "acosh": _simple("Acosh"),
    "atanh": _simple("Atanh"), "round": _composed(_round), "rint": _composed(_round),
    "log1p": _composed(_log1p), "expm1": _composed(_expm1), "erfc": _composed(_erfc),
    "log_sigmoid": _composed(_log_sigmoid), "mish": _composed(_mish), "hardsigmoid": _composed(_hardsigmoid),
    "hardswish": _composed(_hardswish), "silu": _silu, "hardtanh": _hardtanh, "prelu": _prelu,
    "reciprocal_no_nan": _reciprocal_no_nan,
    "less": _compare("less"), "greater": _compare("greater"), "less_equal": _compare("less_equal"),
    "greater_equal": _compare("greater_equal"), "equal": _compare("equal"), "not_equal": _compare("not_equal"),
    "logical_and": _logical("And"), "logical_or": _logical("Or"), "logical_xor": _logical("Xor"),
    "logical_not": _logical("Not"),
    "mod": _mod, "floordiv": _floordiv, "int_divide": _int_divide, "atan2": _atan2,
    "xdivy": _zero_where_x_is_zero(lambda e, x, y, stem: e.add("Div", [x, y], stem=stem)),
    "xlogy": _zero_where_x_is_zero(lambda e, x, y, stem: e.add("Mul", [x, e.add("Log", [y], stem=stem)], stem=stem)),
}
"""op type -> converter, for the elementwise ops."""

__all__ = ["CONVERTERS", "equal", "as_bool", "round_half_even"]
