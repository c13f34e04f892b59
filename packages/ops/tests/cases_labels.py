"""Op cases of the sparse losses with labels outside [0, C): legacy's split-class semantics.

Labels are drawn from [-C-2, C+2), so negative ones, C itself and beyond all occur; each such
label adds zero loss and zero gradient (``flowjob_ops/kernels/class_labels.py``). The references
mask those rows in plain numpy. op_cases.py appends ``CASES``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _labels(draw: Draw, lead: tuple[int, ...], classes: int) -> np.ndarray:
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    return np.asarray(draw(fst.arrays(lead, st.integers(-classes - 2, classes + 1), dtype=dtype)))


def _lead_and_classes(draw: Draw) -> tuple[tuple[int, ...], int]:
    return tuple(draw(fst.small_shapes(1, 2, 4))), draw(st.integers(1, 4))


def _inside(labels: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(mask of labels in [0, C), labels with the others replaced by 0 so they can index)."""
    inside = (labels >= 0) & (labels < classes)
    return inside, np.where(inside, labels, 0).astype(np.int64)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# sparse_softmax_cross_entropy (labels, logits) ---------------------------------------------------
def xent_case(draw: Draw) -> Case:
    lead, classes = _lead_and_classes(draw)
    logits = draw(fst.arrays(lead + (classes,), st.floats(-3.0, 3.0, allow_subnormal=False)))
    return [_labels(draw, lead, classes), logits], {}


def xent_ref(labels: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    log_prob = _log_softmax(logits)
    inside, safe = _inside(labels, logits.shape[-1])
    picked = np.take_along_axis(log_prob, safe[..., None], -1)[..., 0]
    return np.where(inside, -picked, 0.0), np.exp(log_prob)


def xent_grad_case(draw: Draw) -> Case:
    (labels, logits), _ = xent_case(draw)
    dy = draw(fst.arrays(labels.shape, st.floats(-3.0, 3.0, allow_subnormal=False)))
    return [labels, np.exp(_log_softmax(logits)).astype(logits.dtype), dy.astype(logits.dtype)], {}


def xent_grad_ref(labels: np.ndarray, prob: np.ndarray, dy: np.ndarray) -> np.ndarray:
    inside, safe = _inside(labels, prob.shape[-1])
    onehot = np.eye(prob.shape[-1])[safe]
    return (prob - onehot) * np.where(inside, dy, 0.0)[..., None]


# sparse_cross_entropy (labels, prediction) -------------------------------------------------------
def ce_case(draw: Draw) -> Case:
    lead, classes = _lead_and_classes(draw)
    prediction = draw(fst.arrays(lead + (classes,), st.floats(0.05, 1.0)))
    return [_labels(draw, lead, classes), prediction], {}


def ce_ref(labels: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    inside, safe = _inside(labels, prediction.shape[-1])
    picked = np.take_along_axis(prediction, safe[..., None], -1)[..., 0]
    return np.where(inside, -np.log(np.maximum(picked, 1e-20)), 0.0)


def ce_grad_case(draw: Draw) -> Case:
    (labels, prediction), _ = ce_case(draw)
    dy = draw(fst.arrays(labels.shape, st.floats(-3.0, 3.0, allow_subnormal=False)))
    return [labels, prediction, dy.astype(prediction.dtype)], {}


def ce_grad_ref(labels: np.ndarray, prediction: np.ndarray, dy: np.ndarray) -> np.ndarray:
    inside, safe = _inside(labels, prediction.shape[-1])
    onehot = np.eye(prediction.shape[-1])[safe] * inside[..., None]
    return -onehot * (dy / np.maximum(np.sum(onehot * prediction, axis=-1), 1e-20))[..., None]


CASES = [
    OpCase("sparse_softmax_cross_entropy", xent_case, reference=xent_ref, wrt=(1,),
           name="sparse_softmax_cross_entropy_labels_out_of_range"),
    OpCase("sparse_softmax_cross_entropy_grad", xent_grad_case, reference=xent_grad_ref, wrt=(),
           name="sparse_softmax_cross_entropy_grad_labels_out_of_range"),
    OpCase("sparse_cross_entropy", ce_case, reference=ce_ref, wrt=(1,),
           name="sparse_cross_entropy_labels_out_of_range"),
    OpCase("sparse_cross_entropy_grad", ce_grad_case, reference=ce_grad_ref, wrt=(),
           name="sparse_cross_entropy_grad_labels_out_of_range"),
]
