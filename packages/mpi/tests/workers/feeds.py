"""python feeds.py debug|plain: in the consistent view rank 1 feeds another global batch of images than rank 0
(the labels alike). The step check names the argument and the ranks: by SHA-256 digests in debug mode, by
fingerprints otherwise; with FLOWJOB_MPI_FEED_CHECK=0 and no debug mode each rank trains on its rows of its
own batch."""
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_mpi import world

flow.config.enable_debug_mode(sys.argv[1] == "debug")


@flow.global_function(type="train")
def train(images: tp.Numpy.Placeholder((4, 3)), labels: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
    w = flow.get_variable("w", shape=(3, 1), initializer=flow.ones_initializer())
    loss = flow.matmul(images, w) - labels
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss


batch = np.full((4, 3), 1.0 + world().rank, dtype=np.float32)
labels = np.zeros((4, 1), dtype=np.float32)
for _ in range(2):
    train(batch, labels)
print(f"rank {world().rank} trained")
