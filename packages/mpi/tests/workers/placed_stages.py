"""Legacy placement scopes on the ranks: python placed_stages.py CASE OUT_DIR [STEPS].

- ``pipeline``: a two-stage MLP, stage 1 in ``flow.scope.placement(TAG, "0:0")`` and stage 2 (with the loss) in
  ``"0:1"``, with ``flow.config.cpu_device_num(2)``: trains STEPS steps (python placed_stages.py pipeline OUT_DIR
  STEPS [TAG], TAG ``cpu`` by default); every rank writes result<r>.npz (the losses, the variables and the tag of
  the session's backend) and rank<r>.txt (its planned job);
- ``subset``: one device per machine, an op placed on ``"0:0"`` (rank 0 of 2), another on ``"1:0"``, the rest
  everywhere: every rank writes rank<r>.npy (what it got back) and rank<r>.txt;
- ``missing``: a placement naming device 2 of a machine of 2; ``counts``: 3 devices per machine on 2 ranks;
- ``mismatch``: rank 0 calls one placed job, rank 1 another; ``mirrored``: a placed job with a mirrored argument;
- ``one_machine``: ``flow.config.machine_num(1)`` then ``gpu_device_num(2)`` (OneFlow-Benchmark's order), ops on
  ``"0:0"`` and ``"0:1"``: every rank writes rank<r>.npy and rank<r>.txt; ``one_device``: ``machine_num(1)`` alone on
  2 ranks (one device for two ranks); ``one_device_unplaced``: the same with a job that names no placement;
- ``split``: a table split by rows over every rank and an op placed on rank 0 alone;
- ``four_devices``: ``cpu_device_num(4)``, a table split by rows inside ``placement("cpu", "0:0-3")``: every rank writes
  rank<r>.npz (what it got back, the shape of the table it holds, what the blob's placement says).
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

case, out_dir = sys.argv[1], sys.argv[2]
rank = flow.distributed.get_rank()


def save_plan(job):
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
        f.write(str(job.plan().job))


if case == "pipeline":
    tag = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    flow.config.cpu_device_num(2)
    BATCH, FEATURES, HIDDEN, CLASSES = 8, 6, 5, 4

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, FEATURES)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.3)
        with flow.scope.placement(tag, "0:0"):
            hidden = flow.layers.dense(images, HIDDEN, activation=flow.nn.relu, kernel_initializer=init,
                                       name="stage1")
        with flow.scope.placement(tag, "0:1"):
            logits = flow.layers.dense(hidden, CLASSES, kernel_initializer=init, name="stage2")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    flow.train.CheckPoint().init()
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(int(sys.argv[3])):
        images = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
        labels = rng.integers(0, CLASSES, BATCH).astype(np.int32)
        losses.append(train_job(images, labels))
    values = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}
    np.savez(os.path.join(out_dir, f"result{rank}.npz"), losses=np.stack(losses), **values)
    with open(os.path.join(out_dir, f"backend{rank}.txt"), "w") as f:
        f.write(get_default_session().backend.tag)
    save_plan(train_job)

if case == "subset":
    @flow.global_function()
    def subset_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0"):
            y = flow.math.tanh(x) * 2.0
        with flow.scope.placement("cpu", "1:0"):
            z = flow.math.square(y)
        return flow.math.reduce_sum(z + y, axis=1)

    got = subset_job(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
    np.save(os.path.join(out_dir, f"rank{rank}.npy"), got)
    save_plan(subset_job)

if case in ("missing", "counts"):
    if case == "counts":
        flow.config.cpu_device_num(3)
    else:
        flow.config.cpu_device_num(2)

    @flow.global_function()
    def wrong_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:2" if case == "missing" else "0:0"):
            y = flow.math.relu(x, name="placed_relu")
        return y

    wrong_job(np.ones((4, 3), dtype=np.float32))

if case == "mismatch":
    @flow.global_function()
    def first_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0"):
            y = flow.math.relu(x)
        return y

    @flow.global_function()
    def second_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("cpu", "1:0"):
            y = flow.math.relu(x)
        return y

    (first_job if rank == 0 else second_job)(np.ones((4, 3), dtype=np.float32))

if case == "mirrored":
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def mirrored_job(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.ListNumpy:
        with flow.scope.placement("cpu", "1:0"):
            y = flow.math.relu(x)
        return y

    mirrored_job([np.ones((4, 3), dtype=np.float32)])

if case in ("one_machine", "one_device"):
    flow.config.machine_num(1)
    if case == "one_machine":
        flow.config.gpu_device_num(2)  # without a GPU backend: one warning, the job runs on the CPU

    @flow.global_function()
    def machine_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("gpu", "0:0"):
            y = flow.math.sigmoid(x)
        with flow.scope.placement("gpu", "0:1"):
            z = flow.math.reduce_sum(y * y, axis=0)
        return z

    got = machine_job(np.arange(12, dtype=np.float32).reshape(4, 3) / 5)
    np.save(os.path.join(out_dir, f"rank{rank}.npy"), got)
    save_plan(machine_job)

if case == "one_device_unplaced":
    flow.config.machine_num(1)

    @flow.global_function()
    def plain_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.math.sigmoid(x)

    plain_job(np.ones((4, 3), dtype=np.float32))

if case == "four_devices":
    flow.config.cpu_device_num(4)
    seen = {}

    @flow.global_function()
    def table_job(ids: tp.Numpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-3"):
            table = flow.get_variable("table", (8, 3), initializer=flow.random_normal_initializer(),
                                      distribute=flow.distribute.split(0))
            rows = flow.gather(table, ids)
            seen.update(parallel_size=rows.parallel_size, device_name=rows.parallel_conf.device_name(),
                        parallel_num=flow.current_scope().device_parallel_desc_symbol.parallel_num)
        return flow.math.square(rows)

    flow.train.CheckPoint().init()
    got = table_job(np.array([[0, 7], [3, 4], [5, 1], [2, 6]], dtype=np.int32))
    held = get_default_session().variables["table"].array.shape
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), got=got, held=np.array(held),
             parallel_size=seen["parallel_size"], parallel_num=seen["parallel_num"],
             device_name=np.array(seen["device_name"]))
    save_plan(table_job)

if case == "split":
    @flow.global_function()
    def split_job(ids: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (8, 3), distribute=flow.distribute.split(0))
        with flow.scope.placement("cpu", "0:0"):
            rows = flow.gather(table, ids, name="placed_gather")
        return rows

    split_job(np.arange(4, dtype=np.int32))
