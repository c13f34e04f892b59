"""The legacy documentation's hybrid-parallel example (extended_topics, "consistent view": an MLP whose hidden layer
is data parallel and whose output layer is split by units with ``model_distribute=flow.distribute.split(axis=0)``),
written as legacy wrote it, at small sizes: python hybrid_parallel_mlp.py STEPS OUT_DIR.

Each rank writes rank<r>.npz (the shape it holds of each variable); rank 0 also result.npz (the losses and the
whole variables).
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

steps, out_dir = int(sys.argv[1]), sys.argv[2]
BATCH_SIZE = 8


def mlp(data):
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(data, [data.shape[0], -1])
    hidden = flow.layers.dense(reshape, 16, activation=flow.nn.relu, kernel_initializer=initializer, name="dense1")
    return flow.layers.dense(
        hidden,
        10,
        kernel_initializer=initializer,
        # dense is stored as a column and split on axis=0
        model_distribute=flow.distribute.split(axis=0),
        name="dense2",
    )


def get_train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    return config


@flow.global_function(type="train", function_config=get_train_config())
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 4, 4), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Numpy:
    logits = mlp(images)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


if __name__ == "__main__":
    flow.config.gpu_device_num(2)  # without a GPU backend: one warning, the job runs on the CPU
    check_point = flow.train.CheckPoint()
    check_point.init()
    rng = np.random.default_rng(7)
    losses = []
    for _ in range(steps):
        images = rng.standard_normal((BATCH_SIZE, 1, 4, 4)).astype(np.float32)
        labels = rng.integers(0, 10, BATCH_SIZE).astype(np.int32)
        losses.append(train_job(images, labels).mean())
    try:
        from flowjob_mpi import world
        rank = world().rank
    except ImportError:
        rank = 0
    store = get_default_session().variables
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **{name: np.array(store[name].array.shape)
                                                          for name in store.names()})
    values = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}  # every rank gathers
    if rank == 0:
        np.savez(os.path.join(out_dir, "result.npz"), losses=np.stack(losses), **values)
