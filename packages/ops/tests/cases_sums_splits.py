"""Op cases of the legacy ops reached by ``flow.user_op_builder`` names: square_sum, multi_square_sum,
split_like, indexed_slices_reduce_sum; bounded_concat (concat's max_dim_size) and its gradient
concat_split_like; and ssp_variable_proxy's ring buffer. op_cases.py appends ``CASES`` to its table;
numpy references."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def square_sum_case(draw: Draw) -> Case:
    return [base._array(draw, base._shape(draw))], {}


def multi_square_sum_case(draw: Draw) -> Case:
    return [base._array(draw, base._shape(draw)) for _ in range(draw(st.integers(1, 4)))], {}


def square_sum_ref(*xs: np.ndarray) -> np.ndarray:
    return np.array([sum(float(np.sum(x.astype(np.float64) ** 2)) for x in xs)], dtype=xs[0].dtype)


def split_like_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 3)
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    x_shape = shape[:axis] + (sum(sizes),) + shape[axis + 1:]
    likes = [np.zeros(shape[:axis] + (s,), np.float32) for s in sizes]  # like blobs need only reach the axis
    return [base._array(draw, x_shape)] + likes, {"axis": axis}


def split_like_ref(x: np.ndarray, *likes: np.ndarray, axis: int) -> Any:
    parts = np.split(x, np.cumsum([like.shape[axis] for like in likes])[:-1], axis=axis)
    return tuple(parts) if len(parts) > 1 else parts[0]


def bounded_concat_case(draw: Draw) -> Case:
    """Static inputs filling the bound (the table's single-op jobs hold no dynamic rows)."""
    xs, attrs = base.concat_case(draw)
    axis = attrs["axis"] % xs[0].ndim
    return xs, {**attrs, "max_dim_size": sum(x.shape[axis] for x in xs)}


def concat_split_like_case(draw: Draw) -> Case:
    """dy longer than the like blobs add up to (bounded_concat's bound): its head is cut."""
    shape = base._shape(draw, 1, 3)
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    spare = draw(st.integers(0, 2))
    dy_shape = shape[:axis] + (sum(sizes) + spare,) + shape[axis + 1:]
    likes = [np.zeros(shape[:axis] + (n,) + shape[axis + 1:], np.float32) for n in sizes]
    return [base._array(draw, dy_shape)] + likes, {"axis": axis}


def concat_split_like_ref(dy: np.ndarray, *likes: np.ndarray, axis: int) -> Any:
    bounds = np.cumsum([0] + [like.shape[axis] for like in likes])
    parts = [dy[(slice(None),) * axis + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]
    return tuple(parts) if len(parts) > 1 else parts[0]


def indexed_slices_case(draw: Draw) -> Case:
    n = draw(st.integers(1, 8))
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    indices = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype)
    return [indices, base._array(draw, (n, draw(st.integers(1, 3))))], {}


def indexed_slices_ref(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    keys, inverse = np.unique(indices, return_inverse=True)
    y_indices = np.zeros(indices.shape, indices.dtype)
    y_indices[:keys.shape[0]] = keys
    y_values = np.zeros_like(values)
    np.add.at(y_values, inverse, values)
    return y_indices, y_values, np.array([keys.shape[0]], np.int64)


CASES = [
    OpCase("square_sum", square_sum_case, reference=square_sum_ref, rtol=1e-3, atol=1e-4),
    OpCase("multi_square_sum", multi_square_sum_case, reference=square_sum_ref, rtol=1e-3, atol=1e-4),
    OpCase("split_like", split_like_case, reference=split_like_ref, wrt=(0,)),
    OpCase("bounded_concat", bounded_concat_case,
           reference=lambda *xs, axis, max_dim_size: np.concatenate(xs, axis=axis)),
    OpCase("concat_split_like", concat_split_like_case, reference=concat_split_like_ref, wrt=()),
    OpCase("indexed_slices_reduce_sum", indexed_slices_case, reference=indexed_slices_ref, wrt=()),
]


def ssp_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 2)
    size = draw(st.integers(1, 4))
    step = np.array([draw(st.integers(0, 6))], np.int64)
    return [base._array(draw, shape), base._array(draw, (size,) + shape), step], {}


def ssp_ref(var: np.ndarray, ring: np.ndarray, step: np.ndarray) -> np.ndarray:
    ring = np.array(ring)  # the op writes its buffer in place
    count = int(step[0])
    if count == 0:
        ring[...] = var
    ring[count % ring.shape[0]] = var
    return ring[(count + 1) % ring.shape[0]]


CASES.append(OpCase("ssp_variable_proxy", ssp_case, reference=ssp_ref, wrt=()))
