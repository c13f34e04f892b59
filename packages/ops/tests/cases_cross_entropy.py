"""Op cases of the cross entropy of probabilities (``sparse_cross_entropy``, legacy v0.4) and its gradient
op; op_cases.py's table holds the ones with logits. op_cases.py appends ``CASES``."""
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


_shape, _array = base._shape, base._array


def sparse_ce_case(draw: Draw) -> Case:
    lead = _shape(draw, 1, 2, 3)
    classes = draw(st.integers(1, 5))
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    labels = np.asarray(draw(fst.arrays(lead, st.integers(0, classes - 1), dtype=dtype)))
    prediction = draw(fst.arrays(lead + (classes,), st.floats(0.05, 1.0)))
    return [labels, prediction], {}


def sparse_ce_ref(labels: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    picked = np.take_along_axis(prediction, labels[..., None].astype(np.int64), -1)[..., 0]
    return -np.log(np.maximum(picked, 1e-20))


def sparse_ce_grad_case(draw: Draw) -> Case:
    (labels, prediction), _ = sparse_ce_case(draw)
    if draw(st.booleans()):  # a zero probability: clamped at 1e-20, as legacy
        prediction = prediction.copy()
        prediction.reshape(-1, prediction.shape[-1])[0, labels.reshape(-1)[0]] = 0.0
    return [labels, prediction, _array(draw, labels.shape)], {}


def sparse_ce_grad_ref(labels: np.ndarray, prediction: np.ndarray, dy: np.ndarray) -> np.ndarray:
    onehot = np.eye(prediction.shape[-1])[labels]
    return -onehot * (dy / np.maximum(np.sum(onehot * prediction, axis=-1), 1e-20))[..., None]


CASES = [
    OpCase("sparse_cross_entropy", sparse_ce_case, reference=sparse_ce_ref, wrt=(1,)),
    OpCase("sparse_cross_entropy_grad", sparse_ce_grad_case, reference=sparse_ce_grad_ref, wrt=()),
]
