"""Legacy v0.4's top-level losses and the class-split cross entropy against numpy and legacy's documented
values: flow.smooth_l1_loss, flow.combined_margin_loss, flow.ctc_loss and
nn.distributed_sparse_softmax_cross_entropy_with_logits."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, train_grad = _helpers.fresh_session, _helpers.train_grad


def test_smooth_l1_loss_values_and_prediction_gradient():
    p = np.array([[0.2, -1.5, 3.0, 0.9]], np.float32)
    t = np.array([[0.0, 0.0, 1.0, 0.0]], np.float32)
    y, dx = train_grad((1, 4), lambda x, t: flow.smooth_l1_loss(x, t, beta=1.0), p, t)
    d = p - t
    np.testing.assert_allclose(y, np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5), rtol=1e-6)
    np.testing.assert_allclose(dx, np.where(np.abs(d) < 1, d, np.sign(d)), rtol=1e-6)


def test_smooth_l1_loss_refuses_a_negative_beta():
    @flow.global_function()
    def job(p: tp.Numpy.Placeholder((2,)), t: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.smooth_l1_loss(p, t, beta=-1.0)

    with pytest.raises(FlowjobError, match="smooth_l1_loss at .*beta must be a number >= 0"):
        job(np.zeros(2, np.float32), np.zeros(2, np.float32))


def test_distributed_sparse_softmax_cross_entropy_is_the_sparse_one_on_one_process():
    logits = RNG.normal(size=(3, 5)).astype(np.float32)
    labels = np.array([[0], [4], [2]], np.int32)

    @flow.global_function()
    def job(lab: tp.Numpy.Placeholder((3, 1), dtype=flow.int32), z: tp.Numpy.Placeholder((3, 5))) -> tp.Numpy:
        return flow.nn.distributed_sparse_softmax_cross_entropy_with_logits(lab, z)

    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(job(labels, logits), -logp[np.arange(3), labels[:, 0]], rtol=1e-5)


def test_combined_margin_loss_values_and_gradient():
    x = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]], np.float32)
    label = np.array([0, 2], np.int32)
    m1, m2, m3 = 1.0, 0.5, 0.1
    y, dx = train_grad((2, 3), lambda v, lab: flow.combined_margin_loss(v, lab, m1, m2, m3), x, label)
    want, grad = x.copy(), np.ones_like(x)
    for i, c in enumerate(label):
        theta = math.acos(x[i, c])
        want[i, c] = math.cos(m1 * theta + m2) - m3
        grad[i, c] = m1 * math.sin(m1 * theta + m2) / math.sin(theta)
    np.testing.assert_allclose(y, want, rtol=1e-5)
    np.testing.assert_allclose(dx, grad, rtol=1e-5)


_LOG_PROBS = np.array([
    [[-1.1031, -0.7998, -1.5200], [-0.9808, -1.1363, -1.1908]],
    [[-1.2258, -1.0665, -1.0153], [-1.1135, -1.2331, -0.9671]],
    [[-1.3348, -0.6611, -1.5118], [-0.9823, -1.2355, -1.0941]],
    [[-1.3850, -1.3273, -0.7247], [-0.8235, -1.4783, -1.0994]],
    [[-0.9049, -0.8867, -1.6962], [-1.4938, -1.3630, -0.6547]],
], np.float32)


def _ctc_job(reduction, zero_infinity=False):
    @flow.global_function()
    def job(lp: tp.Numpy.Placeholder((5, 2, 3)), t: tp.Numpy.Placeholder((2, 3), dtype=flow.int32),
            il: tp.Numpy.Placeholder((2,), dtype=flow.int32),
            tl: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.ctc_loss(lp, t, il, tl, blank=0, reduction=reduction, zero_infinity=zero_infinity)

    return job


def test_ctc_loss_legacy_example_and_reductions():
    targets = np.array([[1, 2, 2], [1, 2, 2]], np.int32)
    lengths = np.array([5, 5], np.int32), np.array([3, 3], np.int32)
    # legacy's documented output for this example
    np.testing.assert_allclose(_ctc_job("none")(_LOG_PROBS, targets, *lengths), [3.918017, 2.907672], rtol=1e-5)
    flow.clear_default_session()
    np.testing.assert_allclose(_ctc_job("sum")(_LOG_PROBS, targets, *lengths), 3.918017 + 2.907672, rtol=1e-5)
    flow.clear_default_session()
    np.testing.assert_allclose(_ctc_job("mean")(_LOG_PROBS, targets, *lengths), (3.918017 + 2.907672) / 6,
                               rtol=1e-5)


def test_ctc_loss_zero_infinity():
    # a target of 3 labels with a repeat needs 4 steps: 2 input steps make the alignment impossible
    targets = np.array([[1, 2, 2], [1, 0, 0]], np.int32)
    il, tl = np.array([2, 5], np.int32), np.array([3, 1], np.int32)
    loss = _ctc_job("none")(_LOG_PROBS, targets, il, tl)
    assert np.isinf(loss[0]) and np.isfinite(loss[1])
    flow.clear_default_session()
    zeroed = _ctc_job("none", zero_infinity=True)(_LOG_PROBS, targets, il, tl)
    assert zeroed[0] == 0 and zeroed[1] == loss[1]


def test_ctc_loss_gradient_through_log_softmax_is_legacys():
    """Legacy's kernel returned exp(lp) - posterior for d loss / d log_probs, PyTorch's convention, which
    equals the true gradient once it goes back through log_softmax; through log_softmax both agree."""
    logits = RNG.normal(size=(5, 2, 3)).astype(np.float32)
    targets = np.array([[1, 2, 2], [2, 1, 0]], np.int32)
    il, tl = np.array([5, 4], np.int32), np.array([3, 2], np.int32)
    _, dx = train_grad((5, 2, 3), lambda v, t, i, n: flow.ctc_loss(flow.nn.log_softmax(v), t, i, n,
                                                                    reduction="none"), logits, targets, il, tl)
    # the gradient w.r.t. the logits: softmax - posterior occupancy of each (t, label), by enumerating paths
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    want = np.zeros_like(logits)
    for b in range(2):
        counts, total = np.zeros((5, 3)), 0.0
        for path in itertools.product(range(3), repeat=int(il[b])):
            collapsed = [c for j, c in enumerate(path) if c != 0 and (j == 0 or c != path[j - 1])]
            if collapsed == list(targets[b, :tl[b]]):
                p = np.prod([probs[t, b, c] for t, c in enumerate(path)])
                total += p
                for t, c in enumerate(path):
                    counts[t, c] += p
        want[:il[b], b] = probs[:il[b], b] - counts[:il[b]] / total
    np.testing.assert_allclose(dx, want, rtol=1e-4, atol=1e-5)


def test_ctc_loss_names_the_op_for_lengths_past_the_blobs():
    job = _ctc_job("none")
    targets = np.array([[1, 2, 2], [1, 2, 2]], np.int32)
    with pytest.raises(FlowjobError, match=r"CTCLoss_\d+.*input_lengths must lie in \[1, 5\], got \[6, 5\]"):
        job(_LOG_PROBS, targets, np.array([6, 5], np.int32), np.array([3, 3], np.int32))
    with pytest.raises(FlowjobError, match=r"target_lengths must lie in \[0, 3\], got \[4, 3\]"):
        job(_LOG_PROBS, targets, np.array([5, 5], np.int32), np.array([4, 3], np.int32))
    # the session stays usable
    np.testing.assert_allclose(job(_LOG_PROBS, targets, np.array([5, 5], np.int32), np.array([3, 3], np.int32)),
                               [3.918017, 2.907672], rtol=1e-5)


def test_ctc_loss_refuses_a_bad_reduction():
    @flow.global_function()
    def job(lp: tp.Numpy.Placeholder((5, 2, 3)), t: tp.Numpy.Placeholder((2, 3), dtype=flow.int32),
            il: tp.Numpy.Placeholder((2,), dtype=flow.int32),
            tl: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.ctc_loss(lp, t, il, tl, reduction="avg")

    with pytest.raises(FlowjobError, match='ctc_loss at .*reduction must be "none", "sum" or "mean"'):
        job(_LOG_PROBS, np.ones((2, 3), np.int32), np.full(2, 5, np.int32), np.full(2, 3, np.int32))


def test_softmax_cross_entropy_gradient_is_legacys_prob_minus_labels() -> None:
    # legacy's and TensorFlow's rule: (softmax(logits) - labels) * dy, also for labels whose rows do not sum to 1
    # (OneFlow's own test normalises its labels over the wrong axis of a (5, 5, 1000) blob)
    logits = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], np.float32)
    labels = np.array([[0.2, 0.3, 0.1], [1.0, 0.5, 0.5]], np.float32)
    loss, dx = train_grad(logits.shape, lambda xv, lab: flow.nn.softmax_cross_entropy_with_logits(lab, xv),
                          logits, labels)
    prob = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(loss, -(labels * np.log(prob)).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(dx, prob - labels, rtol=1e-5, atol=1e-6)
