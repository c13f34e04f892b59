"""Op cases of the losses other than cross entropy (records in ``records/losses.py``): smooth_l1_loss,
combined_margin_loss, ctc_loss and their gradient ops. op_cases.py appends ``CASES``.

References are plain numpy loops written from the definitions: CTC sums the probabilities of every
alignment path (enumerated, so targets stay short). Inputs keep away from kinks (|d| = beta for smooth L1,
|x| near 1 for the margin's arccos).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def smooth_l1_case(draw: Draw) -> Case:
    shape = base._shape(draw)
    beta = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))
    label = base._array(draw, shape)
    # the difference keeps a gap from 0 and from +-beta, where the pieces meet
    diff = base._away(draw, shape, (0.0, beta, -beta), 0.1, -4.0, 4.0)
    return [label + diff, label], {"beta": beta}


def smooth_l1_ref(prediction: np.ndarray, label: np.ndarray, beta: float) -> np.ndarray:
    d = np.abs(prediction - label)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def smooth_l1_grad_case(draw: Draw) -> Case:
    (prediction, label), attrs = smooth_l1_case(draw)
    return [base._array(draw, prediction.shape), prediction, label], attrs


def smooth_l1_grad_ref(dy: np.ndarray, prediction: np.ndarray, label: np.ndarray, beta: float) -> np.ndarray:
    d = prediction - label
    with np.errstate(divide="ignore", invalid="ignore"):
        return dy * np.where(np.abs(d) < beta, d / beta, np.sign(d))


def margin_case(draw: Draw) -> Case:
    rows, classes = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    x = base._array(draw, (rows, classes), -0.9, 0.9)
    # some labels fall outside [0, classes): legacy leaves those rows unchanged
    label = np.array([draw(st.integers(-1, classes)) for _ in range(rows)], dtype=draw(st.sampled_from(
        [np.int32, np.int64])))
    attrs = {"m1": draw(st.sampled_from([1.0, 2.0])), "m2": draw(st.sampled_from([0.0, 0.3])),
             "m3": draw(st.sampled_from([0.0, 0.2]))}
    return [x, label], attrs


def margin_ref(x: np.ndarray, label: np.ndarray, m1: float, m2: float, m3: float) -> np.ndarray:
    y = x.copy()
    for i, c in enumerate(label):
        if 0 <= c < x.shape[1]:
            y[i, c] = math.cos(m1 * math.acos(x[i, c]) + m2) - m3
    return y


def margin_grad_case(draw: Draw) -> Case:
    (x, label), attrs = margin_case(draw)
    return [base._array(draw, x.shape), label, x], attrs


def margin_grad_ref(dy: np.ndarray, label: np.ndarray, x: np.ndarray, m1: float, m2: float, m3: float) -> np.ndarray:
    dx = dy.copy()
    for i, c in enumerate(label):
        if 0 <= c < x.shape[1]:
            # d/dx cos(m1 acos x + m2) = m1 sin(m1 acos x + m2) / sqrt(1 - x^2)
            dx[i, c] = dy[i, c] * m1 * math.sin(m1 * math.acos(x[i, c]) + m2) / math.sqrt(1 - x[i, c] ** 2)
    return dx


def ctc_case(draw: Draw) -> Case:
    batch, classes, longest = draw(st.integers(1, 3)), draw(st.integers(2, 4)), draw(st.integers(1, 2))
    blank = draw(st.integers(0, classes - 1))
    labels = [c for c in range(classes) if c != blank]
    target_lengths = np.array([draw(st.integers(0, longest)) for _ in range(batch)], dtype=np.int32)
    steps = draw(st.integers(2 * longest + 1, 2 * longest + 2))  # every target fits (repeats need a blank)
    input_lengths = np.array([draw(st.integers(2 * int(n) + 1, steps)) for n in target_lengths],
                             dtype=draw(st.sampled_from([np.int32, np.int64])))
    targets = np.array([[draw(st.sampled_from(labels)) for _ in range(longest)] for _ in range(batch)],
                       dtype=np.int32)
    logits = base._array(draw, (steps, batch, classes), -2.0, 2.0)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return [log_probs, targets, input_lengths, target_lengths], {"blank": blank, "zero_infinity": False}


def _collapse(path: tuple[int, ...], blank: int) -> list[int]:
    out: list[int] = []
    previous = None
    for c in path:
        if c != previous and c != blank:
            out.append(c)
        previous = c
    return out


def ctc_ref(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray,
            blank: int, zero_infinity: bool) -> np.ndarray:
    """-log of the summed probability of every path that collapses to the target (all paths enumerated)."""
    _, batch, classes = log_probs.shape
    loss = np.empty(batch)
    for b in range(batch):
        steps, want = int(input_lengths[b]), list(targets[b, :int(target_lengths[b])])
        total = 0.0
        for path in itertools.product(range(classes), repeat=steps):
            if _collapse(path, blank) == want:
                total += math.exp(sum(log_probs[t, b, c] for t, c in enumerate(path)))
        loss[b] = -math.log(total) if total > 0 else math.inf
        if zero_infinity and math.isinf(loss[b]):
            loss[b] = 0.0
    return loss.astype(log_probs.dtype)


def ctc_grad_case(draw: Draw) -> Case:
    inputs, attrs = ctc_case(draw)
    loss = ctc_ref(*inputs, **attrs)
    return [*inputs, base._array(draw, loss.shape), loss], attrs


def ctc_grad_ref(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray,
                 dy: np.ndarray, loss: np.ndarray, blank: int, zero_infinity: bool) -> np.ndarray:
    """d loss / d log_probs by path enumeration: minus the posterior count of (t, c) on the target's paths."""
    steps_all, batch, classes = log_probs.shape
    grad = np.zeros_like(log_probs)
    for b in range(batch):
        steps, want = int(input_lengths[b]), list(targets[b, :int(target_lengths[b])])
        counts, total = np.zeros((steps_all, classes)), 0.0
        for path in itertools.product(range(classes), repeat=steps):
            if _collapse(path, blank) == want:
                p = math.exp(sum(log_probs[t, b, c] for t, c in enumerate(path)))
                total += p
                for t, c in enumerate(path):
                    counts[t, c] += p
        grad[:, b] = -dy[b] * counts / total
    return grad


CASES = [
    OpCase("smooth_l1_loss", smooth_l1_case, reference=smooth_l1_ref, wrt=(0,)),
    OpCase("smooth_l1_loss_grad", smooth_l1_grad_case, reference=smooth_l1_grad_ref, wrt=()),
    OpCase("combined_margin_loss", margin_case, reference=margin_ref),
    OpCase("combined_margin_loss_grad", margin_grad_case, reference=margin_grad_ref, wrt=()),
    OpCase("ctc_loss", ctc_case, reference=ctc_ref),
    OpCase("ctc_loss_grad", ctc_grad_case, reference=ctc_grad_ref, wrt=()),
]
