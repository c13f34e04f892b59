"""Scalar results as legacy programs make them: one sample's cross entropy (rank-1 logits) and a constant
of a bare number are (1,) blobs, never 0-d (legacy's constant op turned shape () into (1,); its
cross-entropy ops refused rank-1 logits outright), so they concatenate with other (1,) results, train,
and come back indexable."""
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session = _helpers.fresh_session  # each test in its own session
LOGITS = np.array([2.0, -1.0, 0.5, 3.0, 0.0], np.float32)
PROBS = np.array([0.1, 0.2, 0.1, 0.5, 0.1], np.float32)


def _log_softmax(x):
    x = x.astype(np.float64)
    return x - x.max() - np.log(np.exp(x - x.max()).sum())


def test_rank1_logits_give_one_element_losses_that_concat():
    shapes = {}

    @flow.global_function()
    def loss_job(logits: tp.Numpy.Placeholder((5,)), label: tp.Numpy.Placeholder((1,), dtype=flow.int32),
                 probs: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        sparse = flow.nn.sparse_softmax_cross_entropy_with_logits(label, logits)
        dense = flow.nn.softmax_cross_entropy_with_logits(probs, logits)
        of_probs = flow.nn.sparse_cross_entropy(label, flow.nn.softmax(logits))
        shapes["losses"] = [sparse.shape, dense.shape, of_probs.shape]
        return flow.concat([sparse, dense, of_probs, flow.math.reduce_max(logits)], axis=0)

    got = loss_job(LOGITS, np.array([3], np.int32), PROBS)
    assert shapes["losses"] == [(1,), (1,), (1,)]
    log_p = _log_softmax(LOGITS)
    np.testing.assert_allclose(got, [-log_p[3], -(PROBS * log_p).sum(), -log_p[3], LOGITS.max()], rtol=1e-5)


def test_a_one_sample_loss_trains_and_reads_as_a_float():
    @flow.global_function(type="train")
    def train_job(label: tp.Numpy.Placeholder((1,), dtype=flow.int32)) -> Tuple[tp.Numpy, tp.Numpy]:
        logits = flow.get_variable("logits", shape=(5,), initializer=flow.constant_initializer(0.0))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(label, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return loss, logits

    loss, before = train_job(np.array([2], np.int32))
    assert loss.shape == (1,) and abs(float(loss) - np.log(5.0)) < 1e-5 and abs(loss[0] - np.log(5.0)) < 1e-5
    _, after = train_job(np.array([2], np.int32))
    # d loss / d logits = softmax - onehot = 0.2 everywhere but -0.8 at the label
    np.testing.assert_allclose(after, before - np.array([0.2, 0.2, -0.8, 0.2, 0.2], np.float32), rtol=1e-5)


def test_constants_of_a_bare_number_are_one_element_blobs():
    shapes = {}

    @flow.global_function()
    def const_job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        parts = [flow.constant(2.5), flow.constant(1, dtype=flow.float, shape=()), flow.zeros(()),
                 flow.ones([]), flow.constant_scalar(4.0), flow.math.reduce_sum(x)]
        shapes["parts"] = [p.shape for p in parts]
        return flow.concat(parts, axis=0)

    got = const_job(np.array([1.0, 2.0, 3.0], np.float32))
    assert shapes["parts"] == [(1,)] * 6
    np.testing.assert_array_equal(got, np.array([2.5, 1.0, 0.0, 1.0, 4.0, 6.0], np.float32))


def test_the_ops_themselves_refuse_rank1_logits_as_legacy_did():
    from flowjob_core import apply
    from flowjob_core.errors import FlowjobError

    @flow.global_function()
    def raw_job(logits: tp.Numpy.Placeholder((5,)), probs: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        loss, _prob = apply("softmax_cross_entropy", [probs, logits])
        return loss

    with pytest.raises(FlowjobError, match=r"softmax_cross_entropy: logits must have rank >= 2 .*\(5,\)"):
        raw_job(LOGITS, PROBS)
