"""Op cases of the shape records beyond op_cases.py's table: tile, reverse, tuple_identity and
shape_elem_cnt. op_cases.py appends ``CASES`` to its table; the references are plain numpy."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


_shape, _array = base._shape, base._array


def tile_case(draw: Draw) -> Case:
    shape = _shape(draw, max_side=3)
    count = draw(st.integers(1, len(shape)))  # a short list counts from the last axis
    return [_array(draw, shape)], {"multiples": tuple(draw(st.integers(1, 3)) for _ in range(count))}


def reverse_case(draw: Draw) -> Case:
    shape = _shape(draw)
    rank = len(shape)
    axis = draw(st.one_of(st.integers(-rank, rank - 1),
                          st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True)))
    return [_array(draw, shape)], {"axis": axis}


def reverse_ref(x: np.ndarray, axis: Any) -> np.ndarray:
    axes = {a % x.ndim for a in ([axis] if isinstance(axis, int) else axis)}
    index = tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(x.ndim))
    return x[index]


def tuple_identity_case(draw: Draw) -> Case:
    return [_array(draw, _shape(draw)) for _ in range(draw(st.integers(1, 3)))], {}


def elem_cnt_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 4)
    axis = draw(st.one_of(st.none(), st.lists(st.integers(-len(shape), len(shape) - 1), min_size=0,
                                              max_size=len(shape))))
    return [np.zeros(shape)], {"axis": axis, "dtype": draw(st.sampled_from([None, np.int64, np.float32]))}


def elem_cnt_ref(x: np.ndarray, axis: Any, dtype: Any) -> np.ndarray:
    axes = range(x.ndim) if axis is None else {a % x.ndim for a in axis}
    return np.array([math.prod(x.shape[a] for a in axes)], dtype=dtype or np.int32)


CASES = [
    OpCase("tile", tile_case, reference=lambda x, multiples: np.tile(x, multiples)),
    OpCase("reverse", reverse_case, reference=reverse_ref),
    OpCase("tuple_identity", tuple_identity_case, reference=lambda *xs: tuple(x.copy() for x in xs)),
    OpCase("shape_elem_cnt", elem_cnt_case, reference=elem_cnt_ref, wrt=()),
]
