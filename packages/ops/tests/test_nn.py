"""flow.nn through real global functions: values against numpy, legacy arguments and names, errors."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import activations, array, bias_add, conv, dropout, losses, pool, softmax
from flowjob_core.testing.modules import sibling


loops = sibling(__file__, "reference_loops")
probe = sibling(__file__, "grad_probe")
run_job = sibling(__file__, "jobs").run_job
RNG = np.random.default_rng(7)


def test_activations_match_numpy() -> None:
    x = RNG.uniform(-4, 4, (3, 5)).astype(np.float32)
    np.testing.assert_allclose(run_job(activations.relu, x), np.maximum(x, 0))
    np.testing.assert_allclose(run_job(activations.sigmoid, x), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(run_job(activations.tanh, x), np.tanh(x), rtol=1e-6)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(run_job(activations.gelu, x), x * 0.5 * (1 + erf(x / math.sqrt(2))), rtol=1e-6,
                               atol=1e-6)


def test_sigmoid_does_not_overflow_for_large_negative_inputs() -> None:
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    with np.errstate(all="raise"):
        y = run_job(activations.sigmoid, x)
    np.testing.assert_allclose(y, [0, 0, 0.5, 1, 1], atol=1e-7)


def test_gelu_float64_is_accurate_to_rounding() -> None:
    x = np.linspace(-8, 8, 401)
    want = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    np.testing.assert_allclose(run_job(activations.gelu, x), want, rtol=1e-13, atol=1e-15)


def test_softmax_and_log_softmax_along_axes() -> None:
    x = RNG.normal(size=(2, 3, 4)) * 10
    for axis in (None, 0, 1, -1):
        ax = -1 if axis is None else axis
        e = np.exp(x - x.max(ax, keepdims=True))
        np.testing.assert_allclose(run_job(lambda v: softmax.softmax(v, axis=axis), x), e / e.sum(ax, keepdims=True))
        np.testing.assert_allclose(run_job(lambda v: softmax.log_softmax(v, axis), x),
                                   np.log(e / e.sum(ax, keepdims=True)), atol=1e-12)


def test_bias_add_legacy_default_axis_is_one() -> None:
    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b3, b5 = np.arange(3, dtype=np.float32), np.arange(5, dtype=np.float32)
    np.testing.assert_allclose(run_job(bias_add.bias_add, x, b3), x + b3[:, None, None])
    np.testing.assert_allclose(run_job(lambda v, b: bias_add.bias_add(v, b, "NHWC"), x, b5), x + b5)


def test_sparse_softmax_cross_entropy_is_per_sample() -> None:
    logits = RNG.normal(size=(6, 10)).astype(np.float32) * 5
    labels = np.array([0, 3, 9, -1, 10, 4], np.int32)  # -1 and 10 lie outside the classes: zero loss
    with pytest.warns(RuntimeWarning, match="2 of 6 labels lie outside the class range"):
        loss = run_job(losses.sparse_softmax_cross_entropy_with_logits, labels, logits)
    z = logits.astype(np.float64) - logits.max(1, keepdims=True)
    inside = (labels >= 0) & (labels < 10)
    want = np.where(inside, np.log(np.exp(z).sum(1)) - z[np.arange(6), np.where(inside, labels, 0)], 0.0)
    assert loss.shape == (6,) and loss.dtype == np.float32
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    # labels with a trailing axis of 1 are accepted, as legacy did
    np.testing.assert_allclose(run_job(losses.sparse_softmax_cross_entropy_with_logits, labels[:, None], logits), loss)


def test_sparse_softmax_cross_entropy_is_finite_for_extreme_logits() -> None:
    logits = np.array([[1000.0, -1000.0], [-1000.0, 1000.0]], np.float32)
    loss = run_job(losses.sparse_softmax_cross_entropy_with_logits, np.array([1, 1], np.int32), logits)
    np.testing.assert_allclose(loss, [2000.0, 0.0])


def test_dense_and_sigmoid_cross_entropy() -> None:
    logits = RNG.normal(size=(4, 3))
    labels = RNG.dirichlet(np.ones(3), size=4)
    z = logits - logits.max(1, keepdims=True)
    log_prob = z - np.log(np.exp(z).sum(1, keepdims=True))
    np.testing.assert_allclose(run_job(losses.softmax_cross_entropy_with_logits, labels, logits),
                               -(labels * log_prob).sum(1))
    targets = RNG.uniform(size=(4, 3))
    s = 1 / (1 + np.exp(-logits))
    np.testing.assert_allclose(run_job(losses.sigmoid_cross_entropy_with_logits, targets, logits),
                               -targets * np.log(s) - (1 - targets) * np.log(1 - s))


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pooling_matches_the_loops(fmt: str, padding: str) -> None:
    x = RNG.permutation(2 * 3 * 5 * 6).reshape((2, 3, 5, 6) if fmt == "NCHW" else (2, 5, 6, 3)).astype(np.float32)
    from flowjob_ops.kernels import window2d as pads

    hw = (5, 6)
    resolved, _ = pads.resolve_padding(padding, hw, 2, 2)
    got = run_job(lambda v: pool.max_pool2d(v, ksize=2, strides=2, padding=padding, data_format=fmt), x)
    np.testing.assert_allclose(got, loops.max_pool_ref(x, (2, 2), (2, 2), resolved, fmt))
    resolved, _ = pads.resolve_padding(padding, hw, (3, 2), (1, 2))
    got = run_job(lambda v: pool.avg_pool2d(v, (3, 2), [1, 2], padding, fmt), x)
    np.testing.assert_allclose(got, loops.avg_pool_ref(x, (3, 2), (1, 2), resolved, fmt), rtol=1e-6)


def test_pooling_accepts_four_entry_ksize_and_ceil_mode() -> None:
    x = RNG.permutation(25).reshape(1, 1, 5, 5).astype(np.float32)
    got = run_job(lambda v: pool.max_pool2d(v, [1, 1, 2, 2], [1, 1, 2, 2], "VALID"), x)
    assert got.shape == (1, 1, 2, 2)
    got = run_job(lambda v: pool.max_pool2d(v, 2, 2, "VALID", ceil_mode=True), x)
    assert got.shape == (1, 1, 3, 3)
    np.testing.assert_allclose(got[0, 0, 2], x[0, 0, 4, [1, 3, 4]].clip(min=x[0, 0, 4, [0, 2, 4]]))


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_conv2d_matches_the_loops(fmt: str) -> None:
    x = RNG.normal(size=(2, 4, 6, 5) if fmt == "NCHW" else (2, 6, 5, 4)).astype(np.float32)
    w = RNG.normal(size=(6, 2, 3, 3) if fmt == "NCHW" else (6, 3, 3, 2)).astype(np.float32)
    got = run_job(lambda a, b: conv.conv2d(a, b, strides=[2, 1], padding="SAME", data_format=fmt, groups=2), x, w)
    from flowjob_ops.kernels import window2d as pads

    resolved, _ = pads.resolve_padding("SAME", (6, 5), 3, (2, 1))
    np.testing.assert_allclose(got, loops.conv2d_ref(x, w, (2, 1), resolved, (1, 1), 2, fmt), rtol=1e-4, atol=1e-5)


def test_dropout_is_the_identity_in_predict_jobs() -> None:
    x = RNG.normal(size=(4, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_job(lambda v: dropout.dropout(v, rate=0.5), x), x)


def test_dropout_in_train_jobs_masks_scales_and_routes_the_gradient_through_the_same_mask() -> None:
    session = probe.session_with_probe()
    x = np.ones((50, 40), np.float32)

    @probe.job(session)
    def train(a: tp.Numpy.Placeholder((50, 40))) -> tp.Numpy:
        w = fc.get_variable("w", shape=(50, 40), initializer=lambda s, d, r: np.full(s, 2.0, d))
        y = dropout.dropout(a * w, rate=0.25, seed=3)
        fc.add_loss(y * y)  # dloss/dy = 2y, so d/dw = 2y * mask * x
        probe.probe(y, "y", diff=False)
        probe.probe(w, "dw")
        return y

    masks = []
    for _ in range(3):
        y = train(x)
        mask = y / 2.0
        masks.append(mask)
        assert set(np.unique(mask)) <= {0.0, np.float32(1 / 0.75)}
        np.testing.assert_allclose(probe.RESULTS["dw"], 2 * y * mask * x, rtol=1e-6)
    dropped = np.mean([np.mean(m == 0) for m in masks])
    assert 0.2 < dropped < 0.3
    assert not np.array_equal(masks[0], masks[1])  # a new mask every step
    session.close()


def test_dropout_seed_gives_a_repeatable_mask_sequence() -> None:
    def run_once() -> list[np.ndarray]:
        session = probe.session_with_probe()

        @probe.job(session)
        def train(a: tp.Numpy.Placeholder((8, 8))) -> tp.Numpy:
            w = fc.get_variable("w", shape=(8, 8), initializer=lambda s, d, r: np.ones(s, d))
            y = dropout.dropout(a * w, rate=0.5, noise_shape=(8, 1), seed=11)
            fc.add_loss(y)
            probe.probe(w, "dw")
            return y

        out = [train(np.ones((8, 8), np.float32)) for _ in range(2)]
        session.close()
        return out

    first, second = run_once(), run_once()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
        assert np.all(a == a[:, :1])  # noise_shape (8, 1): one draw per row


def test_unnamed_ops_take_legacy_prefixes_one_id_per_call() -> None:
    names = {}

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((2, 4, 4, 4)), labels: tp.Numpy.Placeholder((2,), dtype=np.int32)) -> tp.Numpy:
        flat = _flat(x)
        names["relu"] = activations.relu(x).lbn
        names["pool"] = pool.max_pool2d(x, 2, 2, "VALID").lbn
        names["dropout"] = dropout.dropout(x, 0.5).lbn
        names["xent"] = losses.sparse_softmax_cross_entropy_with_logits(labels, flat).lbn
        names["conv"] = conv.conv2d(x, fc.get_variable("k", shape=(2, 4, 1, 1)), 1, "VALID").lbn
        return x

    job(np.zeros((2, 4, 4, 4), np.float32), np.zeros(2, np.int32))
    prefixes = {"relu": "Relu", "pool": "MaxPool2D", "dropout": "Dropout", "xent": "SparseSoftmaxCrossEntropy",
                "conv": "Conv2D"}
    ids = []
    for key, prefix in prefixes.items():
        node, out = names[key].split("/")
        assert node.rsplit("_", 1)[0] == prefix and out == "out_0", names[key]
        ids.append(int(node.rsplit("_", 1)[1]))
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # one process-wide id per public call


def _flat(x: Any) -> Any:

    return array.reshape(x, (x.shape[0], -1))


@pytest.mark.parametrize("body, pattern", [
    (lambda x, w: conv.conv2d(x, w, 1, "SAME", "NHWC"),
     r"\(conv2d\) at .*test_nn.py:\d+: weight shape \(4, 3, 3, 3\) \(NHWC\) has 3 input channels per filter, "
     r"expected C/groups = 5/1 = 5"),
    (lambda x, w: conv.conv2d(x, w, 0, "SAME"), r"strides must be >= 1 in every dimension, got 0"),
    (lambda x, w: conv.conv2d(x, w, 1, "FULL"),
     r"padding must be 'SAME', 'SAME_UPPER', 'SAME_LOWER' or 'VALID'.*'FULL'"),
    (lambda x, w: pool.max_pool2d(x, 2, -1, "VALID"),
     r"\(max_pool2d\).*strides must be >= 1 in every dimension, got -1"),
    (lambda x, w: pool.max_pool2d(x, 9, 1, "VALID"), r"output would be empty"),
    (lambda x, w: dropout.dropout(x, 1.0), r"dropout rate must be a number in \[0, 1\), got 1.0"),
    (lambda x, w: softmax.softmax(x, axis=4), r"\(softmax\).*axis 4 is out of range for a rank-4 input"),
    (lambda x, w: bias_add.bias_add(x, w), r"bias must have shape \(3,\) to match axis 1 of value \(1, 3, 5, 5\)"),
])
def test_bad_shapes_and_attributes_name_the_op_and_the_users_line(body: Any, pattern: str) -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((1, 3, 5, 5)), w: tp.Numpy.Placeholder((4, 3, 3, 3))) -> tp.Numpy:
        return body(x, w)

    with pytest.raises(fc.OpBuildError, match=pattern) as info:
        job(np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 3, 3, 3), np.float32))
    assert "job 'job'" in str(info.value) and "test_nn.py:" in str(info.value)


def test_sparse_labels_must_match_the_logits() -> None:
    @fc.global_function()
    def job(labels: tp.Numpy.Placeholder((3,), dtype=np.int32), logits: tp.Numpy.Placeholder((4, 10))) -> tp.Numpy:
        return losses.sparse_softmax_cross_entropy_with_logits(labels, logits)

    with pytest.raises(fc.OpBuildError, match=r"logits \(4, 10\) needs labels \(4,\), got \(3,\)"):
        job(np.zeros(3, np.int32), np.zeros((4, 10), np.float32))
