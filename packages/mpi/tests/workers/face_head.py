"""A face-recognition head as oneflow_face wrote it: the class layer ``fc7-weight`` split by classes
(``distribute=flow.distribute.split(0)``), partial-FC sampling (``flow.distributed_partial_fc_sample`` inside
``flow.scope.placement("cpu", "0:0-1")``), the logits of the sampled classes, softmax cross entropy over the split
class axis: python face_head.py STEPS OUT_DIR NUM_SAMPLE.

Each rank writes rank<r>.npz (the shape it holds of each variable); rank 0 also result.npz (the losses and the
whole variables) and dump.txt.
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

steps, out_dir, num_sample = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
BATCH, FEATURES, EMBEDDING, CLASSES = 8, 6, 4, 16


@flow.global_function(type="train")
def train_job(images: tp.Numpy.Placeholder((BATCH, FEATURES)),
              labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
    embedding = flow.layers.dense(images, EMBEDDING, kernel_initializer=flow.random_normal_initializer(stddev=0.3),
                                  name="fc1")
    with flow.scope.placement("cpu", "0:0-1"):
        labels = labels.with_distribute(flow.distribute.broadcast())
        fc7_weight = flow.get_variable(name="fc7-weight", shape=(CLASSES, EMBEDDING),
                                       initializer=flow.random_normal_initializer(mean=0.0, stddev=0.3),
                                       distribute=flow.distribute.split(0))
        mapped_label, sampled_label, sampled_weight = flow.distributed_partial_fc_sample(
            weight=fc7_weight, label=labels, num_sample=num_sample)
        fc7 = flow.matmul(a=embedding.with_distribute(flow.distribute.broadcast()), b=sampled_weight,
                          transpose_b=True)
        fc7 = fc7 * 4.0
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(mapped_label, fc7.with_distribute(
            flow.distribute.split(1)), name="softmax_loss")
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
    return loss


if __name__ == "__main__":
    flow.config.cpu_device_num(2)  # the devices "0:0-1" names (oneflow_face: gpu_device_num(device_num_per_node))
    rng = np.random.default_rng(11)
    losses = []
    for _ in range(steps):
        images = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
        labels = rng.integers(0, CLASSES, BATCH).astype(np.int32)
        losses.append(train_job(images, labels))
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
        with open(os.path.join(out_dir, "dump.txt"), "w") as f:
            f.write(str(train_job.plan().job))
