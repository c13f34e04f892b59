"""python jobs.py same|different: rank 0 trains train_a while rank 1 trains train_b (same gradient sizes, or
different ones); both must stop with an error naming what each rank ran."""
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_mpi import world

WIDTH_B = 1 if sys.argv[1] == "same" else 2


@flow.global_function(type="train")
def train_a(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
    w = flow.get_variable("wa", shape=(3, 1), initializer=flow.ones_initializer())
    loss = flow.matmul(x, w)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


@flow.global_function(type="train")
def train_b(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
    w = flow.get_variable("wb", shape=(3, WIDTH_B), initializer=flow.ones_initializer())
    loss = flow.matmul(x, w)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


job = train_a if world().rank == 0 else train_b
for _ in range(3):
    job(np.ones((4, 3), dtype=np.float32))
print(f"rank {world().rank} trained")
