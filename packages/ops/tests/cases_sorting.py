"""Op cases of sorting, segment sums and triangles: sort, arg_sort, top_k, in_top_k, the three
segment sums, tril, fused_scale_tril. op_cases.py appends ``CASES`` to its table.

References are plain loops written apart from the kernels: orders come from Python's ``sorted``
with an explicit (value, index) key, which is legacy's tie rule (lower index first in both
directions); segment sums add slice by slice. Differentiable ops draw distinct values (no ties);
the index ops draw small integers so ties are exercised.
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


def _shape(draw: Draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, max_dims, max_side)))


def _array(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False)))


def _with_ties(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.integers(-2, 2).map(float)))


def _order(row: np.ndarray, descending: bool) -> list[int]:
    sign = -1.0 if descending else 1.0
    return sorted(range(len(row)), key=lambda i: (sign * row[i], i))


def _rows(x: np.ndarray) -> Any:
    return itertools.product(*(range(d) for d in x.shape[:-1]))


# sort / arg_sort / top_k --------------------------------------------------------------------
def _direction(draw: Draw) -> dict:
    return {"direction": draw(st.sampled_from(["ASCENDING", "DESCENDING"]))}


def sort_case(draw: Draw) -> Case:
    return [draw(fst.distinct_values(_shape(draw), -2.0, 2.0))], _direction(draw)


def sort_ref(x: np.ndarray, direction: str) -> np.ndarray:
    out = np.empty_like(x)
    for r in _rows(x):
        out[r] = x[r][_order(x[r], direction == "DESCENDING")]
    return out


def arg_sort_case(draw: Draw) -> Case:
    return [_with_ties(draw, _shape(draw))], _direction(draw)


def arg_sort_ref(x: np.ndarray, direction: str) -> np.ndarray:
    out = np.empty(x.shape, np.int32)
    for r in _rows(x):
        out[r] = _order(x[r], direction == "DESCENDING")
    return out


def top_k_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_with_ties(draw, shape)], {"k": draw(st.integers(1, shape[-1] + 1)), "sorted": draw(st.booleans())}


def top_k_ref(x: np.ndarray, k: int, sorted: bool) -> np.ndarray:  # noqa: A002 - the op's attribute
    k = min(k, x.shape[-1])
    out = np.empty(x.shape[:-1] + (k,), np.int32)
    for r in _rows(x):
        out[r] = _order(x[r], True)[:k]
    return out


# in_top_k -------------------------------------------------------------------------------
def in_top_k_case(draw: Draw) -> Case:
    rows, classes = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    predictions = _with_ties(draw, (rows, classes)).astype(np.float32)
    if draw(st.booleans()):  # a non-finite score makes the whole row say no
        predictions[draw(st.integers(0, rows - 1)), draw(st.integers(0, classes - 1))] = np.inf
    targets = np.array([draw(st.integers(-1, classes)) for _ in range(rows)], np.int32)  # some out of range
    return [targets, predictions], {"k": draw(st.integers(0, classes + 1))}


def in_top_k_ref(targets: np.ndarray, predictions: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros(targets.shape, np.int8)
    for i, t in enumerate(targets):
        row = predictions[i]
        if 0 <= t < len(row) and all(np.isfinite(v) for v in row):
            out[i] = sum(1 for v in row if v > row[t]) < k
    return out


# segment sums ----------------------------------------------------------------------------
def _segment_layout(draw: Draw) -> tuple[tuple[int, ...], int, int, int]:
    """(data shape, axis, ids rank, num_segments)."""
    shape = _shape(draw, 1, 3)
    axis = draw(st.integers(0, len(shape) - 1))
    ids_rank = draw(st.integers(1, len(shape) - axis))
    return shape, axis, ids_rank, draw(st.integers(1, 4))


def _ids(draw: Draw, shape: tuple[int, ...], num_segments: int) -> np.ndarray:
    return draw(fst.arrays(shape, st.integers(0, num_segments - 1))).astype(np.int32)


def segment_sum_case(draw: Draw) -> Case:
    shape, axis, k, n = _segment_layout(draw)
    ids = _ids(draw, shape[axis:axis + k], n)
    return [_array(draw, shape), ids], {"axis": axis, "num_segments": n}


def segment_sum_ref(data: np.ndarray, ids: np.ndarray, axis: int, num_segments: int) -> np.ndarray:
    k = ids.ndim
    out = np.zeros(data.shape[:axis] + (num_segments,) + data.shape[axis + k:], data.dtype)
    lead = (slice(None),) * axis
    for pos in itertools.product(*(range(d) for d in ids.shape)):
        out[lead + (ids[pos],)] += data[lead + pos]
    return out


def segment_sum_like_case(draw: Draw) -> Case:
    (data, ids), attrs = segment_sum_case(draw)
    axis, k = attrs["axis"], ids.ndim
    like = np.zeros(data.shape[:axis] + (attrs["num_segments"],) + data.shape[axis + k:])
    return [data, ids, like], {"axis": axis}


def segment_sum_like_ref(data: np.ndarray, ids: np.ndarray, like: np.ndarray, axis: int) -> np.ndarray:
    return segment_sum_ref(data, ids, axis, like.shape[axis])


def batch_segment_case(draw: Draw) -> Case:
    shape = _shape(draw, 1, 3)
    m = draw(st.integers(1, len(shape)))
    n = draw(st.integers(1, 4))
    return [_array(draw, shape), _ids(draw, shape[:m], n)], {"num_segments": n}


def batch_segment_ref(data: np.ndarray, ids: np.ndarray, num_segments: int) -> np.ndarray:
    m = ids.ndim
    out = np.zeros(data.shape[:m - 1] + (num_segments,) + data.shape[m:], data.dtype)
    for pos in itertools.product(*(range(d) for d in ids.shape)):
        out[pos[:-1] + (ids[pos],)] += data[pos]
    return out


# tril ---------------------------------------------------------------------------------------
def tril_case(draw: Draw) -> Case:
    shape = _shape(draw, 2, 4)
    return [_array(draw, shape)], {"diagonal": draw(st.integers(-3, 3)),
                                   "fill_value": draw(st.sampled_from([0, -1.5, 7]))}


def fused_scale_tril_case(draw: Draw) -> Case:
    (x,), attrs = tril_case(draw)
    return [x], {**attrs, "scale": draw(st.sampled_from([1, 0.5, -2.0]))}


def tril_ref(x: np.ndarray, diagonal: int, fill_value: float, scale: float = 1) -> np.ndarray:
    out = x * scale
    for index in itertools.product(*(range(d) for d in x.shape)):
        i, j = index[-2:]
        if j > i + diagonal:
            out[index] = fill_value
    return out


CASES = [
    OpCase("sort", sort_case, reference=sort_ref),
    OpCase("arg_sort", arg_sort_case, reference=arg_sort_ref, wrt=()),
    OpCase("top_k", top_k_case, reference=top_k_ref, wrt=()),
    OpCase("in_top_k", in_top_k_case, reference=in_top_k_ref, wrt=()),
    OpCase("unsorted_segment_sum", segment_sum_case, reference=segment_sum_ref, wrt=(0,)),
    OpCase("unsorted_segment_sum_like", segment_sum_like_case, reference=segment_sum_like_ref, wrt=(0,)),
    OpCase("unsorted_batch_segment_sum", batch_segment_case, reference=batch_segment_ref, wrt=(0,)),
    OpCase("tril", tril_case, reference=tril_ref),
    OpCase("fused_scale_tril", fused_scale_tril_case, reference=tril_ref),
]
