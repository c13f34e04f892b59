"""Op cases of records/data_dependent.py: argwhere and sync_dynamic_resize, whose row count the data decide.
op_cases.py appends ``CASES`` to its table.

References walk the elements in row-major order and keep the coordinates of the nonzero ones, and
take the leading rows by a list comprehension; neither op is differentiable (``wrt=()``).
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _make_argwhere(draw: Draw) -> Case:
    shape = tuple(draw(fst.small_shapes(1, 3, 4)))
    dtype = draw(st.sampled_from([np.float32, np.int32, np.int8]))
    values = draw(fst.arrays(shape, st.sampled_from([0.0, 0.0, 1.0, -2.5])))
    index = draw(st.sampled_from([np.int32, np.int64]))
    return [values.astype(dtype)], {"dtype": np.dtype(index)}


def _ref_argwhere(x: np.ndarray, dtype: Any) -> np.ndarray:
    rows = [cell for cell in itertools.product(*(range(d) for d in x.shape)) if x[cell] != 0]
    return np.array(rows, dtype=dtype).reshape(len(rows), x.ndim)


def _make_resize(draw: Draw) -> Case:
    shape = tuple(draw(fst.small_shapes(1, 3, 4)))
    x = draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False)))
    size = draw(st.integers(0, shape[0]))
    return [x, np.array([size], dtype=draw(st.sampled_from([np.int32, np.int64])))], {"axis": 0}


def _ref_resize(x: np.ndarray, size: np.ndarray, axis: int) -> np.ndarray:
    kept = [x[i] for i in range(int(size[0]))]
    return np.array(kept, dtype=x.dtype).reshape((len(kept),) + x.shape[1:])


CASES = [
    OpCase("argwhere", _make_argwhere, _ref_argwhere, wrt=()),
    OpCase("sync_dynamic_resize", _make_resize, _ref_resize, wrt=()),
]
