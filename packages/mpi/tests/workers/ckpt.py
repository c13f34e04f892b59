"""python ckpt.py save|load|manager PATH OUT_DIR: train two steps and save a checkpoint, or load one, or
(manager) restore the latest of a CheckpointManager at PATH, train and save three times keeping two; each
rank writes its variables to OUT_DIR/rank<r>.npz and, when it began writing a checkpoint, OUT_DIR/wrote<r>."""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core.checkpoint import atomic_replace as checkpoint_files
from flowjob_mpi import world

mode, path, out_dir = sys.argv[1:4]
rank = world().rank
begin = checkpoint_files.begin


def spying_begin(*args, **kwargs):
    open(os.path.join(out_dir, f"wrote{rank}"), "w").close()
    return begin(*args, **kwargs)


checkpoint_files.begin = spying_begin


@flow.global_function(type="train")
def train_job(x: tp.Numpy.Placeholder((6, 3))) -> tp.Numpy:
    w = flow.get_variable("w", shape=(3, 2), initializer=flow.random_normal_initializer())
    loss = flow.math.reduce_mean(flow.math.square(flow.matmul(x, w)))
    flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


check_point = flow.train.CheckPoint()
if mode == "manager":
    manager = flow.train.CheckpointManager(path, max_to_keep=2)
    manager.initialize_or_restore()
    for _ in range(3):
        train_job(np.arange(18, dtype=np.float32).reshape(6, 3) / 10)
        manager.save()
elif mode == "save":
    check_point.init()
    for _ in range(2):
        train_job(np.arange(18, dtype=np.float32).reshape(6, 3) / 10)
    check_point.save(path)
else:
    check_point.load(path)
variables = flow.get_all_variables()
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **{n: v.numpy() for n, v in variables.items()})
