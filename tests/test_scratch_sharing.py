"""Temporaries lent by the plan's scratch pool (``KernelContext.scratch``) change no value: a small
convolutional network (3x3, strided 3x3, 1x1 and strided 1x1 convolutions, batch norms, relus, a
softmax loss, momentum updates) trains bit for bit as with every temporary private to its node,
with each convolution algorithm the cpu backend has."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
value = _helpers.value
SHAPE = (4, 8, 12, 12)
NAMES = ["a-weight", "b-weight", "c-weight", "d-weight", "proj-weight", "fc-weight", "b_bn-gamma"]


def _conv(x, filters, kernel, stride, name):
    w = flow.get_variable(f"{name}-weight", shape=(filters, x.shape[1], kernel, kernel),
                          initializer=flow.random_normal_initializer(stddev=0.1, seed=len(name)))
    return flow.nn.conv2d(x, w, strides=stride, padding="SAME", data_format="NCHW", name=name)


def _train(x, labels):
    flow.clear_default_session()

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(SHAPE), labels: tp.Numpy.Placeholder((SHAPE[0],), dtype=flow.int32)
            ) -> tp.Numpy:
        a = flow.nn.relu(_conv(x, 8, 3, 1, "a"))
        b = flow.nn.relu(flow.layers.batch_normalization(_conv(a, 16, 3, 2, "b"), axis=1, name="b_bn"))
        c = flow.nn.relu(_conv(b, 16, 1, 1, "c"))
        d = _conv(c, 16, 3, 1, "d")
        h = flow.nn.relu(d + _conv(x, 16, 1, 2, "proj"))
        pooled = flow.reshape(flow.nn.avg_pool2d(h, 6, 6, "VALID"), (SHAPE[0], -1))
        w = flow.get_variable("fc-weight", shape=(16, 5), initializer=flow.random_normal_initializer(seed=3))
        loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.matmul(pooled, w)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    losses = [job(x, labels).copy() for _ in range(3)]
    return losses, {n: value(n) for n in NAMES}, job.plan().arena.scratch.allocated_bytes


@pytest.mark.parametrize("algorithm", ["auto", "im2col", "winograd"])
def test_shared_scratch_trains_like_private_temporaries(monkeypatch, algorithm):
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", algorithm)
    rng = np.random.default_rng(4)
    x = rng.normal(size=SHAPE).astype(np.float32)
    labels = rng.integers(0, 5, SHAPE[0]).astype(np.int32)
    losses, variables, lent = _train(x, labels)
    assert lent > 0  # the kernels did take their temporaries from the pool
    with monkeypatch.context() as m:
        m.setattr(KernelContext, "scratch", KernelContext.workspace)  # every temporary the node's own
        ref_losses, ref_variables, ref_lent = _train(x, labels)
    assert ref_lent == 0
    for got, want in zip(losses, ref_losses):
        np.testing.assert_array_equal(got, want)
    for name, want in ref_variables.items():
        np.testing.assert_array_equal(variables[name], want, err_msg=name)


def test_columns_past_the_budget_are_rebuilt_with_the_same_values(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the kept columns are the cpu im2col's
    from flowjob_ops.records import conv as conv_records
    from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter

    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "im2col")
    reused: list[bool] = []
    original = Conv2dBackwardFilter.__call__

    def spy(self, x, dy, *args, **kwargs):
        reused.append(kwargs.get("reuse_cols", False))
        return original(self, x, dy, *args, **kwargs)

    monkeypatch.setattr(Conv2dBackwardFilter, "__call__", spy)
    rng = np.random.default_rng(5)
    x = rng.normal(size=SHAPE).astype(np.float32)
    labels = rng.integers(0, 5, SHAPE[0]).astype(np.int32)
    losses, variables, _ = _train(x, labels)
    assert reused and all(reused)  # the default budget keeps these small matrices
    reused.clear()
    monkeypatch.setattr(conv_records, "KEEP_COLUMNS_BYTES", 0)
    rebuilt_losses, rebuilt_variables, _ = _train(x, labels)
    assert reused and not any(reused)
    for got, want in zip(rebuilt_losses, losses):
        np.testing.assert_array_equal(got, want)
    for name, want in variables.items():
        np.testing.assert_array_equal(rebuilt_variables[name], want, err_msg=name)
