"""The benchmark-model examples (examples/cnn_benchmark, wide_deep.py, dcgan.py) run as scripts with
reduced flags, each in its own process; and the legacy behaviours the v0.4 benchmark scripts rely on."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_legacy_internal_distribute_module_is_importable() -> None:
    # DCGAN's layers.py imports it by path
    import oneflow.python.framework.distribute as distribute_util

    assert distribute_util.split(1) == flow.distribute.split(1)
    assert distribute_util.broadcast() == flow.distribute.broadcast()


def test_conv2d_transpose_takes_the_filters_channels_when_output_shape_disagrees() -> None:
    flow.clear_default_session()
    x = np.random.default_rng(0).normal(size=(2, 4, 3, 3)).astype(np.float32)

    @flow.global_function()
    def job(v: tp.Numpy.Placeholder((2, 4, 3, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 2, 3, 3), initializer=flow.constant_initializer(1.0))
        # channels 4 (value's) where the filter makes 2: legacy v0.2 used the filter's
        return flow.nn.conv2d_transpose(v, w, output_shape=(2, 4, 6, 6), strides=2, padding="SAME")

    with pytest.warns(UserWarning, match=r"conv2d_transpose.*filter has 2"):
        out = job(x)
    assert out.shape == (2, 2, 6, 6)
    # every output pixel sums the input channels under a ones filter: both output channels agree
    np.testing.assert_allclose(out[:, 0], out[:, 1])
    assert abs(out.sum()) > 0


def test_conv2d_transpose_still_refuses_a_wrong_batch() -> None:
    flow.clear_default_session()

    @flow.global_function()
    def job(v: tp.Numpy.Placeholder((2, 4, 3, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 2, 3, 3), initializer=flow.constant_initializer(1.0))
        return flow.nn.conv2d_transpose(v, w, output_shape=(3, 2, 6, 6), strides=2, padding="SAME")

    with pytest.raises(Exception, match=r"job 'job'.*batch must be value's \(2\)"):
        job(np.zeros((2, 4, 3, 3), np.float32))


def test_sigmoid_cross_entropy_takes_int32_click_labels_and_trains() -> None:
    flow.clear_default_session()
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(32, 4)).astype(np.float32)
    labels = (feats[:, :1] > 0).astype(np.int32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((32, 4)), y: tp.Numpy.Placeholder((32, 1), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 1, name="fc")
        loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5])).minimize(loss)
        return loss

    losses = [float(job(feats, labels)) for _ in range(20)]
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]
