"""python reader.py write|ranks|one|stale DATA_DIR OUT_DIR: OFRecord readers on several ranks against one process.

write: DATA_DIR gets PARTS part files of RECORDS records each (features x: 6 floats, y: one int32).
ranks: (under mpiexec) a train job reading BATCH records per step through flow.data.ofrecord_reader; each
    rank reads BATCH / ranks records per step from its own part files; rank 0 writes result.npz (the
    returned per-row losses and record ids of every step, the final variables), every rank rank<r>.npz.
one: the same model in one process, fed through placeholders the union the ranks read: per step, the
    rank-major concatenation of each rank's next records (its parts in order, looping over its epoch).
stale: ranks, but the reader is traced in a world of one (another plugin answers flowjob_world): an error naming
    the reader.
laid_out: ranks, but the job also declares a split variable: an error naming the job and the reader.
"""
import os
import sys
from typing import Tuple

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_ofrecord import iter_records, record_pb2 as pb, write_part

mode, data_dir, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
PARTS, RECORDS, BATCH, STEPS, RANKS = 2, 12, 8, 5, 2  # 5 steps of 4 records per rank: past one epoch of 12

if mode == "write":
    rng = np.random.default_rng(5)
    for p in range(PARTS):
        write_part(os.path.join(data_dir, f"part-{p}"), [
            pb.OFRecord(feature={"x": pb.Feature(float_list=pb.FloatList(value=rng.standard_normal(6).tolist())),
                                 "y": pb.Feature(int32_list=pb.Int32List(value=[int(rng.integers(0, 4))]))})
            for _ in range(RECORDS)])
    sys.exit(0)


def model(x, y):
    if laid_out:  # a layout makes the boxing pass, not the data-parallel view, spread the job over the ranks
        flow.get_variable("table", (4, 2), distribute=flow.distribute.split(0))
    init = flow.random_normal_initializer(stddev=0.5)
    hidden = flow.layers.dense(x, 8, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
    logits = flow.layers.dense(hidden, 4, kernel_initializer=init, name="out")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
    return loss


laid_out = mode == "laid_out"
if laid_out:
    mode = "ranks"
if mode == "stale":  # a reader traced without this rank's shard: a plugin answers flowjob_world before flowjob-mpi
    from flowjob_core import get_default_session, hookimpl
    from flowjob_core.runtime.world import ONE_PROCESS

    class OneProcessWorld:
        @hookimpl
        def flowjob_world(self):
            return ONE_PROCESS

    get_default_session().pm.register(OneProcessWorld())  # pluggy asks the last registered first
    mode = "ranks"
if mode == "ranks":
    @flow.global_function(type="train")
    def train_job() -> Tuple[tp.Numpy, tp.Numpy]:
        ids = flow.data.ofrecord_reader(data_dir, batch_size=BATCH, data_part_num=PARTS, name="reader")
        x = flow.data.OFRecordRawDecoder(ids, "x", shape=(6,), dtype=flow.float32)
        y = flow.data.OFRecordRawDecoder(ids, "y", shape=(), dtype=flow.int32)
        return model(x, y), ids

    steps = [train_job() for _ in range(STEPS)]
    losses, ids = np.stack([s[0] for s in steps]), np.stack([s[1] for s in steps])
else:
    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((BATCH, 6)), y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
                  ) -> tp.Numpy:
        return model(x, y)

    shards = []  # each rank's records in the order it reads them: its parts in order
    for r in range(RANKS):
        parts = range(r * PARTS // RANKS, (r + 1) * PARTS // RANKS)
        shards.append([(p * RECORDS + k, record) for p in parts
                       for k, record in enumerate(iter_records(os.path.join(data_dir, f"part-{p}")))])
    per_rank = BATCH // RANKS
    losses_list, ids_list = [], []
    for step in range(STEPS):
        picked = [shard[(step * per_rank + k) % len(shard)] for shard in shards for k in range(per_rank)]
        x = np.array([r.feature["x"].float_list.value for _, r in picked], dtype=np.float32)
        y = np.array([r.feature["y"].int32_list.value[0] for _, r in picked], dtype=np.int32)
        losses_list.append(train_job(x, y))
        ids_list.append(np.array([i for i, _ in picked], dtype=np.int64))
    losses, ids = np.stack(losses_list), np.stack(ids_list)

values = {n: v.numpy() for n, v in flow.get_all_variables().items()}
values["losses"], values["ids"] = losses, ids
rank = flow.distributed.get_rank()
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **values)
if rank == 0:
    np.savez(os.path.join(out_dir, "result.npz"), **values)
