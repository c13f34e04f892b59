"""A small bottleneck block (1x1 -> 3x3 -> 1x1 with a strided 1x1 projection, batch norms, relus)
trains to the same values whichever convolution kernels the cpu backend picks: the automatic choice
(the 1x1 convolutions as batched matrix products) against im2col everywhere."""
from __future__ import annotations

import numpy as np

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
value = _helpers.value
SHAPE = (4, 16, 12, 12)


def _conv(x, filters, kernel, stride, name):
    w = flow.get_variable(f"{name}-weight", shape=(filters, x.shape[1], kernel, kernel),
                          initializer=flow.random_normal_initializer(stddev=0.1, seed=len(name)))
    return flow.nn.conv2d(x, w, strides=stride, padding="SAME", data_format="NCHW", name=name)


def _train(monkeypatch, algorithm, x, labels):
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", algorithm)
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")  # the algorithms are the cpu backend's
    flow.clear_default_session()

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(SHAPE), labels: tp.Numpy.Placeholder((SHAPE[0],), dtype=flow.int32)
            ) -> tp.Numpy:
        a = flow.nn.relu(flow.layers.batch_normalization(_conv(x, 8, 1, 1, "a"), axis=1, name="a_bn"))
        b = flow.nn.relu(flow.layers.batch_normalization(_conv(a, 8, 3, 2, "b"), axis=1, name="b_bn"))
        c = flow.layers.batch_normalization(_conv(b, 32, 1, 1, "c"), axis=1, name="c_bn")
        proj = flow.layers.batch_normalization(_conv(x, 32, 1, 2, "proj"), axis=1, name="proj_bn")
        h = flow.nn.relu(c + proj)
        pooled = flow.reshape(flow.nn.avg_pool2d(h, 6, 6, "VALID"), (SHAPE[0], -1))
        w = flow.get_variable("fc-weight", shape=(32, 5), initializer=flow.random_normal_initializer(seed=3))
        loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.matmul(pooled, w)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    losses = [float(job(x, labels)) for _ in range(3)]
    kinds = {type(k).__name__ for k in job.plan().step.__globals__.values()}
    assert ("PointwiseForward" in kinds) == (algorithm == "auto")
    names = ["a-weight", "b-weight", "c-weight", "proj-weight", "fc-weight", "a_bn-gamma", "proj_bn-beta"]
    return losses, {n: value(n) for n in names}


def test_automatic_kernels_train_like_im2col(monkeypatch):

    rng = np.random.default_rng(2)
    x = rng.normal(size=SHAPE).astype(np.float32)
    labels = rng.integers(0, 5, SHAPE[0]).astype(np.int32)
    losses, variables = _train(monkeypatch, "auto", x, labels)
    ref_losses, ref_variables = _train(monkeypatch, "im2col", x, labels)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    for name, want in ref_variables.items():
        np.testing.assert_allclose(variables[name], want, rtol=1e-3, atol=1e-5, err_msg=name)
