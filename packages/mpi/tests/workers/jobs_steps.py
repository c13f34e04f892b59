"""Rank 0 runs its train job once more than rank 1: its last step finds no partner."""
import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_mpi import world


@flow.global_function(type="train")
def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
    w = flow.get_variable("w", shape=(3, 1), initializer=flow.ones_initializer())
    loss = flow.matmul(x, w)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


x = np.ones((4, 3), dtype=np.float32)
if world().rank == 0:
    train(x)  # the extra step (its collectives pair with rank 1's first)
for _ in range(3):
    train(x)
print(f"rank {world().rank} trained")
