"""The benchmark workloads in flowjob, written as a legacy OneFlow user would write them."""
from __future__ import annotations

from typing import Callable

import numpy as np

import oneflow as flow
import oneflow.typing as tp

import big_flowjob


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
        hidden = flow.nn.dropout(hidden, rate=0.5, seed=1, name="dropout")  # seeded: a run's masks repeat
    return flow.layers.dense(hidden, 10, kernel_initializer=init, name="dense2")


def _resnet50_train(rng: np.random.Generator, batch: int = big_flowjob.RESNET_BATCH
                    ) -> tuple[Callable[[], object], Callable[[], object]]:
    images = rng.random((batch, 3, 224, 224), dtype=np.float32)
    labels = rng.integers(0, 1000, batch).astype(np.int32)

    @flow.global_function(type="train")
    def resnet50_train_job(x: tp.Numpy.Placeholder((batch, 3, 224, 224)),
                           y: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, big_flowjob.resnet50(x))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), momentum=0.9).minimize(loss)
        return loss

    def step() -> object:
        return resnet50_train_job(images, labels)
    return step, step


def _bert_train(rng: np.random.Generator) -> tuple[Callable[[], object], Callable[[], object]]:
    cfg, batch = big_flowjob.BERT, big_flowjob.BERT_BATCH
    seq, preds = cfg["seq"], cfg["predictions"]
    tokens = rng.integers(0, cfg["vocab"], (batch, seq)).astype(np.int32)
    # masked positions as row indices into the (batch * seq, hidden) activations
    positions = (np.arange(batch)[:, None] * seq + rng.integers(0, seq, (batch, preds))).astype(np.int32)
    mlm_labels = rng.integers(0, cfg["vocab"], (batch, preds)).astype(np.int32)
    nsp_labels = rng.integers(0, 2, batch).astype(np.int32)

    @flow.global_function(type="train")
    def bert_train_job(t: tp.Numpy.Placeholder((batch, seq), dtype=flow.int32),
                       p: tp.Numpy.Placeholder((batch, preds), dtype=flow.int32),
                       m: tp.Numpy.Placeholder((batch, preds), dtype=flow.int32),
                       n: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = big_flowjob.bert_pretrain(t, p, m, n, batch)
        flow.optimizer.AdamW(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), weight_decay=0.01,
                             weight_decay_excludes=["bias", "beta", "gamma"]).minimize(loss)
        return loss

    def step() -> object:
        return bert_train_job(tokens, positions, mlm_labels, nsp_labels)
    return step, step


BIG = {"resnet50_train": _resnet50_train, "bert_train": _bert_train}


def build(workload: str, batch: int, seed: int = 0, big_batch: int | None = None
          ) -> tuple[Callable[[], object], Callable[[], object]]:
    """(first_call, step) for a workload, each returning the job's result (a training job's loss); the first call
    traces and plans the job. The device is the
    session's (``FLOWJOB_DEVICE``); ``big_batch`` overrides ResNet-50's batch."""
    flow.clear_default_session()
    rng = np.random.default_rng(seed)
    if workload in BIG:
        return BIG[workload](rng, *(() if big_batch is None else (big_batch,)))
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

        def step() -> object:
            return train_job(images, labels)
    else:
        @flow.global_function(type="predict")
        def infer_job(x: tp.Numpy.Placeholder((batch, 1, 28, 28))) -> tp.Numpy:
            return net(x) if workload.startswith("mlp") else net(x, False)

        def step() -> object:
            return infer_job(images)

    return step, step
