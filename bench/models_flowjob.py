"""The benchmark workloads in flowjob, written as a legacy OneFlow user would write them."""
from __future__ import annotations

from typing import Callable

import numpy as np

import oneflow as flow
import oneflow.typing as tp


def _mlp(images):
    init = flow.kaiming_initializer(distribution="random_normal", mode="fan_in", nonlinearity="relu")
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
    return flow.layers.dense(hidden, 10, kernel_initializer=init, name="output")


def _lenet(images, train):
    init = flow.kaiming_initializer(distribution="random_normal", mode="fan_in", nonlinearity="relu")
    conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1",
                               kernel_initializer=init)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2",
                               kernel_initializer=init)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=init, name="dense1")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
    return flow.layers.dense(hidden, 10, kernel_initializer=init, name="dense2")


def build(workload: str, batch: int, seed: int = 0) -> tuple[Callable[[], object], Callable[[], None]]:
    """(first_call, step) for a workload; the first call traces and plans the job."""
    flow.clear_default_session()
    rng = np.random.default_rng(seed)
    images = rng.random((batch, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    net = _mlp if workload.startswith("mlp") else (lambda x, train: _lenet(x, train))

    if workload.endswith("train") or workload == "lenet_epoch":
        @flow.global_function(type="train")
        def train_job(x: tp.Numpy.Placeholder((batch, 1, 28, 28)),
                      y: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
            logits = net(x) if workload.startswith("mlp") else net(x, True)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss

        def step() -> None:
            train_job(images, labels)
    else:
        @flow.global_function(type="predict")
        def infer_job(x: tp.Numpy.Placeholder((batch, 1, 28, 28))) -> tp.Numpy:
            return net(x) if workload.startswith("mlp") else net(x, False)

        def step() -> None:
            infer_job(images)

    return step, step
