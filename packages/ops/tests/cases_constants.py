"""Op case of ``range`` (the constants' records beyond op_cases.py's table); the reference is ``np.arange``.
op_cases.py appends ``CASES`` to its table."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def range_case(draw: Draw) -> Case:
    start = draw(st.integers(-5, 5))
    limit = start + draw(st.integers(1, 9))
    attrs = {"start": start, "limit": limit, "delta": draw(st.integers(1, limit - start)),
             "dtype": draw(st.sampled_from([np.dtype(t) for t in (np.int64, np.int32, np.float32, np.float64)]))}
    return [], attrs


def range_ref(start: int, limit: int, delta: int, dtype: Any) -> np.ndarray:
    return np.array(list(range(start, limit, delta)), dtype=dtype)


CASES = [
    OpCase("range", range_case, reference=range_ref, wrt=()),
]
