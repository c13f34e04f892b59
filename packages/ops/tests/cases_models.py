"""Op cases the benchmark models need beyond the base table: sigmoid cross entropy on the integer
click labels Wide&Deep feeds (legacy kernels took int8/int32 labels) and unique_with_counts (its
hybrid embedding); numpy references."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def sigmoid_xent_int_case(draw: Draw) -> Case:
    shape = base._shape(draw)
    dtype = draw(st.sampled_from([np.int8, np.int32, np.int64]))
    labels = np.asarray(draw(st.lists(st.integers(0, 1), min_size=int(np.prod(shape)),
                                      max_size=int(np.prod(shape)))), dtype=dtype).reshape(shape)
    return [labels, base._array(draw, shape, -6.0, 6.0)], {}


def sigmoid_xent_int_grad_case(draw: Draw) -> Case:
    (labels, x), _ = sigmoid_xent_int_case(draw)
    return [labels, x, base._array(draw, x.shape)], {}


def unique_case(draw: Draw) -> Case:
    n = draw(st.integers(1, 12))
    dtype = draw(st.sampled_from([np.int32, np.int64, np.float32]))
    # few distinct values, so repeats are common
    x = np.asarray(draw(st.lists(st.integers(-3, 4), min_size=n, max_size=n)), dtype=dtype)
    return [x], {"out_idx": draw(st.sampled_from([np.dtype(np.int32), np.dtype(np.int64)]))}


def unique_ref(x: np.ndarray, out_idx: np.dtype) -> tuple[np.ndarray, ...]:
    place: dict = {}
    y, count = np.zeros_like(x), np.zeros(x.shape, out_idx)
    idx = np.zeros(x.shape, out_idx)
    for i, v in enumerate(x.tolist()):
        if v not in place:
            place[v] = len(place)
            y[place[v]] = v
        idx[i] = place[v]
        count[place[v]] += 1
    return y, idx, count, np.array([len(place)], out_idx)


CASES = [
    OpCase("unique_with_counts", unique_case, reference=unique_ref, wrt=()),
    OpCase("sigmoid_cross_entropy", sigmoid_xent_int_case, reference=base.sigmoid_xent_ref,
           name="sigmoid_cross_entropy_int_labels"),
    OpCase("sigmoid_cross_entropy_grad", sigmoid_xent_int_grad_case, reference=base.sigmoid_xent_grad_ref,
           wrt=(), name="sigmoid_cross_entropy_grad_int_labels"),
]
