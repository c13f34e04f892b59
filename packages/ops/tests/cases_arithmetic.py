"""Op case for ``flowjob_ops/records/arithmetic.py`` (integer ``flow.math.divide``), joined to ``op_cases.CASES``.

The reference is C's integer division, truncated toward zero, written without numpy's ``//`` (which
floors): the quotient of the magnitudes with the sign of the operands' product. Divisors are nonzero
(a zero fails the step; tests/test_ops_math_legacy.py checks that error).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def truncated_quotient(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    magnitude = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64)) * magnitude).astype(a.dtype)


def int_divide_case(draw: Draw) -> Case:
    sa, sb = draw(fst.broadcastable_pair(max_dims=3, max_side=3))
    dtype = draw(st.sampled_from([np.int8, np.int32, np.int64]))
    a = draw(hnp.arrays(dtype, tuple(sa), elements=st.integers(-100, 100)))
    b = draw(hnp.arrays(dtype, tuple(sb), elements=st.integers(-9, 9).filter(bool)))
    return [a, b], {}


CASES = [OpCase("int_divide", int_divide_case, reference=truncated_quotient, wrt=())]
