"""numpy's ufuncs as C expressions, one template per ufunc, for the generated chain kernels (``chain_source``).

A template gives the result of one ufunc call on operands already in the step's compute type, with
numpy's semantics where they differ from the obvious C: ``maximum``/``minimum`` propagate NaN and, of
equal values (``-0.0`` and ``0.0``), return the second operand in float32 and float64 and the first in
float16, as numpy's loops do; ``sign`` of NaN is NaN and of ``-0.0`` is ``0.0``. The four basic
operations, ``square``, ``reciprocal`` and ``sqrt`` use the round-to-nearest intrinsics
(``__fadd_rn``...), which the compiler never contracts into a fused multiply-add and ``--use_fast_math``
never approximates: each step rounds once, as numpy's call does. ``exp``, ``log``, ``tanh`` and
``power`` are CUDA's math functions, a few ulps from numpy's.

Fields of a template: ``{a}``, ``{b}`` the operands in the call's order; ``{p}`` the intrinsics'
precision letter (``f``, ``d``); ``{f}`` the math functions' suffix (``expf``, ``exp``); ``{one}``,
``{zero}`` typed literals.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CType:
    """How a numpy dtype appears in a CuPy kernel: ``storage`` the element's C type (CuPy's names:
    ``float16`` is CuPy's half class, or ``__half`` in a plain CUDA file), ``compute`` the type a step
    computes in (float for float16: numpy's half loops convert to float and round back each call)."""

    dtype: str
    storage: str
    compute: str

    @property
    def kind(self) -> str:
        return np.dtype(self.dtype).kind

    @property
    def literal_fields(self) -> dict[str, str]:
        if self.compute == "float":
            return {"p": "f", "f": "f", "one": "1.0f", "zero": "0.0f"}
        if self.compute == "double":
            return {"p": "d", "f": "", "one": "1.0", "zero": "0.0"}
        return {"p": "", "f": "", "one": "true", "zero": "false"}


C_TYPES: dict[str, CType] = {
    "float16": CType("float16", "float16", "float"),
    "float32": CType("float32", "float", "float"),
    "float64": CType("float64", "double", "double"),
    "bool": CType("bool", "bool", "bool"),
}
"""The dtypes generated kernels handle; integer (numpy wraps on overflow, divides into float64) and
complex chains keep the xp kernel."""


@dataclass(frozen=True)
class Template:
    """One ufunc's C expression. ``kinds``: the operand dtype kinds it takes (``f`` floating, ``b``
    bool); ``predicate``: the result is bool (a comparison), else the operands' dtype; ``half``: the
    expression for float16 operands where numpy's half loop differs from its float ones."""

    text: str
    kinds: str = "f"
    predicate: bool = False
    half: str | None = None

    def expression(self, ctype: CType, operands: list[str]) -> str:
        text = self.half if self.half is not None and ctype.dtype == "float16" else self.text
        named = dict(zip("ab", operands))
        return text.format(**named, **ctype.literal_fields)


def _comparison(operator: str) -> Template:
    return Template(f"{{a}} {operator} {{b}}", kinds="fb", predicate=True)


TEMPLATES: dict[str, Template] = {
    "abs": Template("fabs{f}({a})"),
    "add": Template("__{p}add_rn({a}, {b})"),
    "divide": Template("__{p}div_rn({a}, {b})"),
    "equal": _comparison("=="),
    "exp": Template("exp{f}({a})"),
    "greater": _comparison(">"),
    "greater_equal": _comparison(">="),
    "less": _comparison("<"),
    "less_equal": _comparison("<="),
    "log": Template("log{f}({a})"),
    "maximum": Template("(isnan({a}) || {a} > {b}) ? {a} : {b}", half="({a} >= {b} || isnan({a})) ? {a} : {b}"),
    "minimum": Template("(isnan({a}) || {a} < {b}) ? {a} : {b}", half="({a} <= {b} || isnan({a})) ? {a} : {b}"),
    "multiply": Template("__{p}mul_rn({a}, {b})"),
    "negative": Template("-{a}"),
    "not_equal": _comparison("!="),
    "power": Template("pow{f}({a}, {b})"),
    "reciprocal": Template("__{p}rcp_rn({a})"),
    "sign": Template("{a} > {zero} ? {one} : ({a} < {zero} ? -{one} : ({a} == {zero} ? {zero} : {a}))"),
    "sqrt": Template("__{p}sqrt_rn({a})"),
    "square": Template("__{p}mul_rn({a}, {a})"),
    "subtract": Template("__{p}sub_rn({a}, {b})"),
    "tanh": Template("tanh{f}({a})"),
}
"""Every ufunc a built-in ``Elementwise`` descriptor names; a plugin's op naming another keeps the xp kernel."""
