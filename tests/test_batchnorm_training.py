"""A small conv + batch norm + dense net trained for a few SGD steps: the moving statistics follow
legacy's update (momentum * moving + (1 - momentum) * batch, biased variance) computed in numpy from
the weights each step saw, and a predict job normalizes with them."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

BATCH, C, H, W, F = 6, 2, 5, 5, 3
MOMENTUM, EPS, STEPS = 0.8, 1e-3, 4
RNG = np.random.default_rng(21)
IMAGES = [RNG.normal(size=(BATCH, C, H, W)).astype(np.float32) for _ in range(STEPS + 1)]
LABELS = [RNG.integers(0, 4, size=(BATCH,)).astype(np.int32) for _ in range(STEPS)]
CONV_W0 = RNG.normal(scale=0.5, size=(F, C, 3, 3)).astype(np.float32)
FC_W0 = RNG.normal(size=(4, F * (H - 2) * (W - 2))).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def net(images):
    conv = flow.layers.conv2d(images, F, kernel_size=3, name="conv",
                              kernel_initializer=lambda shape, dtype, rng: CONV_W0.astype(dtype))
    bn = flow.layers.batch_normalization(conv, axis=1, momentum=MOMENTUM, epsilon=EPS, name="bn")
    hidden = flow.reshape(flow.nn.relu(bn), (BATCH, -1))
    return flow.layers.dense(hidden, 4, name="fc", kernel_initializer=lambda shape, dtype, rng: FC_W0.astype(dtype))


def variable(name: str) -> np.ndarray:
    flow.sync_default_session()
    return get_default_session().variables.get(name).copy()


def conv_valid(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    patches = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N C H' W' kh kw
    return np.einsum("nchwij,fcij->nfhw", patches.astype(np.float64), w) + b.reshape(1, -1, 1, 1)


def test_moving_statistics_follow_the_batches_and_predict_uses_them():
    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((BATCH, C, H, W)),
              labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        logits = net(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    @flow.global_function()
    def predict(images: tp.Numpy.Placeholder((BATCH, C, H, W))) -> tp.Numpy:
        return net(images)

    moving_mean, moving_var = np.zeros(F), np.ones(F)
    losses = []
    for step in range(STEPS):
        # the forward pass of a step sees the weights from before that step's update
        weight, bias = (variable("conv-weight"), variable("conv-bias")) if step else (CONV_W0, np.zeros(F))
        y = conv_valid(IMAGES[step], weight, bias)
        gamma_before = variable("bn-gamma") if step else np.ones(F)
        losses.append(train(IMAGES[step], LABELS[step]).mean())
        moving_mean = MOMENTUM * moving_mean + (1 - MOMENTUM) * y.mean(axis=(0, 2, 3))
        moving_var = MOMENTUM * moving_var + (1 - MOMENTUM) * y.var(axis=(0, 2, 3))
        np.testing.assert_allclose(variable("bn-moving_mean"), moving_mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(variable("bn-moving_variance"), moving_var, rtol=1e-4, atol=1e-5)
        assert not np.array_equal(variable("bn-gamma"), gamma_before), "gamma is trained"
    assert np.all(np.isfinite(losses))

    # predict: the moving statistics (not the batch's) normalize, and nothing is updated
    x = IMAGES[STEPS]
    y = conv_valid(x, variable("conv-weight"), variable("conv-bias"))
    c = (1, F, 1, 1)
    normalized = (y - moving_mean.reshape(c)) / np.sqrt(moving_var.reshape(c) + EPS)
    bn = normalized * variable("bn-gamma").reshape(c) + variable("bn-beta").reshape(c)
    want = np.maximum(bn, 0).reshape(BATCH, -1) @ variable("fc-weight").T + variable("fc-bias")
    np.testing.assert_allclose(predict(x), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(variable("bn-moving_mean"), moving_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variable("bn-moving_variance"), moving_var, rtol=1e-4, atol=1e-5)
