"""Op cases of the legacy ``flow.math`` unary functions (records in ``flowjob_ops/records/math_unary.py``).

References are numpy ufuncs, or the standard library's ``math.erf``/``erfc``/``lgamma`` element by
element; digamma (lgamma's gradient) is a fourth-order central difference of ``math.lgamma``,
independent of the kernel's series (about 1e-10 accurate on these inputs).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any


def _elementwise(fn: Any) -> Any:
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x)


def _digamma(x: np.ndarray) -> np.ndarray:
    h = 1e-4
    f = _elementwise(math.lgamma)
    return (f(x - 2 * h) - 8 * f(x - h) + 8 * f(x + h) - f(x + 2 * h)) / (12 * h)


def _between(low: float, high: float, away: tuple[float, ...] = (), gap: float = 0.1) -> Any:
    """Arrays of a small shape in [low, high], keeping ``gap`` from each point of ``away``."""
    def make(draw: Draw) -> tuple[list[np.ndarray], dict]:
        shape = tuple(draw(fst.small_shapes(1, 3, 4)))
        if away:
            return [draw(fst.array_away_from(shape, away, gap, low, high))], {}
        return [draw(fst.arrays(shape, st.floats(low, high, allow_subnormal=False)))], {}

    return make


def _integers(low: int, high: int, offset: float = 0.0) -> tuple[float, ...]:
    return tuple(k + offset for k in range(low, high + 1))


def _lgamma_grad_case(draw: Draw) -> tuple[list[np.ndarray], dict]:
    (x,), _ = _between(-3.5, 6.0, _integers(-4, 0), 0.15)(draw)
    return [x, draw(fst.arrays(x.shape))], {}


def _no_nan_reciprocal(x: np.ndarray) -> np.ndarray:
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 0.0, 1.0 / safe)


def _zeros_and_others(draw: Draw) -> tuple[list[np.ndarray], dict]:
    """reciprocal_no_nan's forward on exact zeros among values away from 0."""
    (x,), _ = _between(-3.0, 3.0, (0.0,), 0.2)(draw)
    zeros = draw(fst.arrays(x.shape, st.booleans(), dtype=bool))
    return [np.where(zeros, 0.0, x)], {}


_ROUNDING_POINTS = _integers(-4, 4)
_HALVES = _integers(-4, 3, 0.5)

CASES = [
    OpCase("sin", _between(-4.0, 4.0), reference=np.sin),
    OpCase("cos", _between(-4.0, 4.0), reference=np.cos),
    OpCase("tan", _between(-1.3, 1.3), reference=np.tan),
    OpCase("asin", _between(-0.9, 0.9), reference=np.arcsin),
    OpCase("acos", _between(-0.9, 0.9), reference=np.arccos),
    OpCase("atan", _between(-4.0, 4.0), reference=np.arctan),
    OpCase("sinh", _between(-3.0, 3.0), reference=np.sinh),
    OpCase("cosh", _between(-3.0, 3.0), reference=np.cosh),
    OpCase("asinh", _between(-4.0, 4.0), reference=np.arcsinh),
    OpCase("acosh", _between(1.1, 5.0), reference=np.arccosh),
    OpCase("atanh", _between(-0.9, 0.9), reference=np.arctanh),
    OpCase("log1p", _between(-0.8, 3.0), reference=np.log1p),
    OpCase("expm1", _between(-3.0, 3.0), reference=np.expm1),
    OpCase("floor", _between(-3.9, 3.9, _ROUNDING_POINTS), reference=np.floor),
    OpCase("ceil", _between(-3.9, 3.9, _ROUNDING_POINTS), reference=np.ceil),
    OpCase("rint", _between(-3.9, 3.9, _HALVES), reference=np.rint),
    OpCase("round", _between(-3.9, 3.9, _HALVES), reference=np.rint),
    OpCase("rsqrt", _between(0.3, 4.0), reference=lambda x: 1.0 / np.sqrt(x)),
    OpCase("reciprocal_no_nan", _between(-3.0, 3.0, (0.0,), 0.2), reference=_no_nan_reciprocal),
    OpCase("reciprocal_no_nan", _zeros_and_others, reference=_no_nan_reciprocal, wrt=(), name="reciprocal_no_nan@0"),
    OpCase("softplus", _between(-30.0, 30.0), reference=lambda x: np.logaddexp(0.0, x)),
    OpCase("log_sigmoid", _between(-30.0, 30.0), reference=lambda x: -np.logaddexp(0.0, -x)),
    OpCase("erf", _between(-4.0, 4.0), reference=_elementwise(math.erf)),
    OpCase("erfc", _between(-3.0, 6.0), reference=_elementwise(math.erfc)),
    OpCase("lgamma", _between(-3.5, 6.0, _integers(-4, 0), 0.15), reference=_elementwise(math.lgamma)),
    OpCase("lgamma_grad", _lgamma_grad_case, reference=lambda x, dy: dy * _digamma(x), wrt=()),
]
