"""python feeds.py debug|plain: in the consistent view rank 1 feeds another global batch than rank 0; with
debug mode the step check names the argument, without it each rank trains on its rows of its own batch."""
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_mpi import world

flow.config.enable_debug_mode(sys.argv[1] == "debug")


@flow.global_function(type="train")
def train(images: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
    w = flow.get_variable("w", shape=(3, 1), initializer=flow.ones_initializer())
    loss = flow.matmul(images, w)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


batch = np.full((4, 3), 1.0 + world().rank, dtype=np.float32)
for _ in range(2):
    train(batch)
print(f"rank {world().rank} trained")
