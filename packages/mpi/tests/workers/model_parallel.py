"""A Wide&Deep-style model whose embedding table is split by rows and whose hidden layer is split by columns:
python model_parallel.py STEPS OUT_DIR [OPTIMIZER [LOAD_DIR [SAVE_DIR]]].

Every rank feeds the same batch; each writes rank<r>.npz (the shapes it holds of each split variable) and rank 0
also result.npz (the returned losses of every step and the whole variables, gathered) and dump.txt (the planned
job as `python -m oneflow dump` prints it). LOAD_DIR: start from that checkpoint; SAVE_DIR: save there at the end.
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

steps, out_dir = int(sys.argv[1]), sys.argv[2]
optimizer_name = sys.argv[3] if len(sys.argv) > 3 else "sgd"
load_dir = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
save_dir = sys.argv[5] if len(sys.argv) > 5 else None
BATCH, FIELDS, VOCAB, DIM, HIDDEN = 8, 3, 64, 4, 8


def make_optimizer():
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    if optimizer_name == "momentum":
        return flow.optimizer.SGD(schedule, momentum=0.9)
    return flow.optimizer.SGD(schedule)


@flow.global_function(type="train")
def train_job(ids: tp.Numpy.Placeholder((BATCH, FIELDS), dtype=flow.int32),
              labels: tp.Numpy.Placeholder((BATCH, 1))) -> tp.Numpy:
    init = flow.random_normal_initializer(stddev=0.5)
    table = flow.get_variable("embedding", (VOCAB, DIM), initializer=init, distribute=flow.distribute.split(0))
    rows = flow.reshape(flow.gather(table, ids), (BATCH, FIELDS * DIM))
    weight = flow.get_variable("hidden-weight", (FIELDS * DIM, HIDDEN), initializer=init,
                               distribute=flow.distribute.split(1))
    bias = flow.get_variable("hidden-bias", (HIDDEN,), initializer=init, distribute=flow.distribute.split(0))
    hidden = flow.nn.relu(flow.nn.bias_add(flow.matmul(rows, weight), bias))
    out = flow.get_variable("out-weight", (HIDDEN, 1), initializer=init)
    logits = flow.matmul(hidden, out)
    loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels, logits))
    make_optimizer().minimize(loss)
    return loss


if load_dir is not None:
    flow.train.CheckPoint().load(load_dir)
rng = np.random.default_rng(3)
losses = []
for _ in range(steps):
    ids = rng.integers(0, VOCAB, size=(BATCH, FIELDS)).astype(np.int32)
    labels = rng.integers(0, 2, size=(BATCH, 1)).astype(np.float32)
    losses.append(train_job(ids, labels))
try:
    from flowjob_mpi import world
    rank = world().rank
except ImportError:
    rank = 0
store = get_default_session().variables
held = {name: np.array(store[name].array.shape) for name in store.names()}
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **held)
if save_dir is not None:
    flow.train.CheckPoint().save(save_dir)
values = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}  # whole: gathered on every rank
if save_dir is not None and rank == 0:
    saved = flow.checkpoint.get(save_dir)
    for name, value in values.items():  # the checkpoint holds the whole variables
        assert saved[name].numpy().tobytes() == value.tobytes(), name
if rank == 0:
    np.savez(os.path.join(out_dir, "result.npz"), losses=np.stack(losses), **values)
    with open(os.path.join(out_dir, "dump.txt"), "w") as f:
        f.write(str(train_job.plan().job))
