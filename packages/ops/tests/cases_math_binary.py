"""Op cases for ``flowjob_ops/records/math_binary.py``: mod, floordiv, atan2, pow, xdivy, xlogy and the
logical ops (joined to ``op_cases.CASES``).

Inputs keep away from each op's jumps and poles where gradients are checked; the ``*_zeros`` cases
check the x == 0 conventions of xdivy/xlogy forward only (their gradients there are tested in
test_math_binary.py, a central difference cannot see them).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def _pair(draw: Draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sa, sb = draw(fst.broadcastable_pair(max_dims=3, max_side=3))
    return tuple(sa), tuple(sb)


def pair_case(a: Any, b: Any) -> Any:
    """Two broadcastable arrays, each drawn by ``a(shape)`` / ``b(shape)`` (hypothesis strategies)."""

    def make(draw: Draw) -> Case:
        sa, sb = _pair(draw)
        return [draw(a(sa)), draw(b(sb))], {}

    return make


def _any(shape: tuple[int, ...]) -> Any:
    return fst.arrays(shape)


def _nonzero(gap: float) -> Any:
    return lambda shape: fst.array_away_from(shape, (0.0,), gap)


def _positive(shape: tuple[int, ...]) -> Any:
    return fst.positive_arrays(shape)


def _alphabet(*values: float) -> Any:
    return lambda shape: fst.arrays(shape, st.sampled_from(values))


def floordiv_case(draw: Draw) -> Case:
    """x = y * (k + f), f in [0.1, 0.9]: floor(x / y) is k with a margin, so small steps never cross a jump."""
    sa, sb = _pair(draw)
    y = draw(fst.array_away_from(sb, (0.0,), 0.5))
    out = np.broadcast_shapes(sa, sb)
    k = draw(fst.arrays(out, st.integers(-3, 3).map(float)))
    f = draw(fst.arrays(out, st.floats(0.1, 0.9)))
    return [y * (k + f), y], {}


def _masked(fn: Any) -> Any:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x == 0, 0.0, fn(x, y))

    return ref


def _int8(fn: Any) -> Any:
    return lambda *arrays: fn(*arrays).astype(np.int8)


XDIVY_REF = _masked(np.divide)
XLOGY_REF = _masked(lambda x, y: x * np.log(y))
LOGIC = _alphabet(-1.0, 0.0, 0.5)  # zeros are common: false, and ties for the two-sided ops

CASES = [
    OpCase("mod", pair_case(_any, _nonzero(0.5)), reference=np.remainder, wrt=()),
    OpCase("floordiv", floordiv_case, reference=lambda x, y: np.floor(x / y)),
    OpCase("atan2", pair_case(_nonzero(0.2), _any), reference=np.arctan2),
    OpCase("pow", pair_case(_positive, _any), reference=np.power),
    OpCase("xdivy", pair_case(_nonzero(0.2), _nonzero(0.5)), reference=np.divide),
    OpCase("xdivy", pair_case(_alphabet(0.0, 1.5, -2.0), _alphabet(0.0, 0.5, -2.0)), reference=XDIVY_REF, wrt=(),
           name="xdivy_zeros"),
    OpCase("xlogy", pair_case(_nonzero(0.2), _positive), reference=lambda x, y: x * np.log(y)),
    OpCase("xlogy", pair_case(_alphabet(0.0, 1.5, -2.0), _alphabet(0.0, 0.5, 2.0)), reference=XLOGY_REF, wrt=(),
           name="xlogy_zeros"),
    OpCase("logical_and", pair_case(LOGIC, LOGIC), reference=_int8(np.logical_and), wrt=()),
    OpCase("logical_or", pair_case(LOGIC, LOGIC), reference=_int8(np.logical_or), wrt=()),
    OpCase("logical_xor", pair_case(LOGIC, LOGIC), reference=_int8(np.logical_xor), wrt=()),
    OpCase("logical_not", lambda draw: ([draw(LOGIC(base._shape(draw)))], {}), reference=_int8(np.logical_not),
           wrt=()),
]
