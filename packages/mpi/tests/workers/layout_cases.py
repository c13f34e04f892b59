"""Small jobs with declared layouts: python layout_cases.py CASE [OUT_DIR].

uneven: a table of 7 rows split over 2 ranks (an error naming job and variable); disagree: rank 0 splits the
table, the others broadcast it (every rank stops naming the variable); hint: a gathered blob annotated
``with_split_distribute(0)``; clip: gradient clipping over a split table (an error naming the op); rows: a
classifier trained on a placeholder of a job that declares a layout, so each rank computes its rows of the batch
classes: a classifier whose class axis is split; manager: a CheckpointManager saves a split table (rank 0 writes,
for hint, rows, classes and manager, the returned values and the planned job to OUT_DIR); shards: partial-FC
sampling for 4 devices of a class layer split over 2 ranks (an error naming job, op and blobs); axis: a blob
annotated split along an axis it lacks (an error naming it); gradient: a product's gradient annotated
``with_gradient_distribute(split(0))`` (gradient_plain: the same without it); alltoall: a row-split table
whose square is annotated split by columns, trained; uneven_blob / uneven_gradient: a blob of 5 rows, or its
gradient, annotated split by rows on 2 ranks (an error naming job, op and blob); gradient_axis: a gradient annotated
split along an axis the blob lacks.
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp

case = sys.argv[1]
try:
    from flowjob_mpi import world
    rank = world().rank
except ImportError:
    rank = 0
IDS = np.array([[0, 5], [3, 3], [7, 1], [2, 6]], dtype=np.int32)

if case == "uneven":  # 7 rows cannot split evenly over 2 ranks
    @flow.global_function()
    def uneven_job(ids: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (7, 3), distribute=flow.distribute.split(0))
        return flow.gather(table, ids)

    uneven_job(np.zeros(4, dtype=np.int32))

if case == "disagree":
    @flow.global_function()
    def disagree_job(ids: tp.Numpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.Numpy:
        layout = flow.distribute.split(0) if rank == 0 else flow.distribute.broadcast()
        table = flow.get_variable("table", (8, 3), distribute=layout)
        return flow.gather(table, ids)

    disagree_job(IDS)

if case == "hint":
    @flow.global_function()
    def hint_job(ids: tp.Numpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (8, 3), initializer=flow.random_normal_initializer(),
                                  distribute=flow.distribute.split(0))
        rows = flow.gather(table, ids).with_split_distribute(0)  # each rank goes on with 2 of the 4 rows
        return flow.math.reduce_sum(flow.math.square(rows), axis=[1, 2])

    value, planned = hint_job(IDS), hint_job.plan().job

if case == "clip":
    @flow.global_function(type="train")
    def clip_job(ids: tp.Numpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (8, 3), distribute=flow.distribute.split(0))
        loss = flow.math.reduce_sum(flow.gather(table, ids))
        clip = flow.optimizer.grad_clipping.by_global_norm(1.0)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), grad_clipping=clip).minimize(loss)
        return loss

    clip_job(IDS)

if case == "rows":
    @flow.global_function(type="train")
    def rows_job(x: tp.Numpy.Placeholder((8, 6)), labels: tp.Numpy.Placeholder((8,), dtype=flow.int32)
                 ) -> tp.Numpy:
        weight = flow.get_variable("weight", (6, 4), initializer=flow.random_normal_initializer(),
                                   distribute=flow.distribute.broadcast())
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.nn.relu(flow.matmul(x, weight)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    data = np.random.default_rng(1)
    x, labels = data.standard_normal((8, 6)).astype(np.float32), data.integers(0, 4, 8).astype(np.int32)
    value = np.stack([rows_job(x, labels) for _ in range(3)])
    value = np.concatenate([value.ravel(), flow.get_all_variables()["weight"].numpy().ravel()])
    planned = rows_job.plan().job

if case == "classes":
    @flow.global_function(type="train")
    def classes_job(x: tp.Numpy.Placeholder((8, 6)), labels: tp.Numpy.Placeholder((8,), dtype=flow.int32)
                    ) -> tp.Numpy:
        weight = flow.get_variable("class-weight", (6, 8), initializer=flow.random_normal_initializer(),
                                   distribute=flow.distribute.split(1))  # each rank scores half the classes
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.matmul(x, weight))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5])).minimize(loss)
        return loss

    data = np.random.default_rng(2)
    x = data.standard_normal((8, 6)).astype(np.float32)
    labels = np.array([0, 7, 3, 4, 4, 1, 8, 6], np.int32)  # 8 is outside the 8 classes: no loss, as one process
    value = np.stack([classes_job(x, labels) for _ in range(3)])
    value = np.concatenate([value.ravel(), flow.get_all_variables()["class-weight"].numpy().ravel()])
    planned = classes_job.plan().job

if case == "manager":  # CheckpointManager.save runs on rank 0 alone: the split table is gathered first
    @flow.global_function()
    def manager_job(ids: tp.Numpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (8, 3), initializer=flow.random_normal_initializer(),
                                  distribute=flow.distribute.split(0))
        return flow.gather(table, ids)

    manager_job(IDS)
    path = flow.train.CheckpointManager(os.path.join(sys.argv[2], "saved")).save()
    value, planned = flow.get_all_variables()["table"].numpy(), manager_job.plan().job

if case == "alltoall":
    @flow.global_function(type="train")
    def alltoall_job(x: tp.Numpy.Placeholder((6, 4))) -> tp.Numpy:
        table = flow.get_variable("table", (8, 6), initializer=flow.random_normal_initializer(),
                                  distribute=flow.distribute.split(0))
        squared = flow.math.square(table).with_split_distribute(1)  # rows -> columns: an all-to-all
        loss = flow.math.reduce_sum(flow.math.sigmoid(flow.matmul(squared, x)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    value = np.stack([alltoall_job(x) for _ in range(3)])
    value = np.concatenate([value.ravel(), flow.get_all_variables()["table"].numpy().ravel()])
    planned = alltoall_job.plan().job

if case in ("gradient", "gradient_plain"):  # x's rows times w's columns; y's gradient annotated split by rows
    @flow.global_function(type="train")
    def gradient_job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
        w = flow.get_variable("w", (6, 4), initializer=flow.random_normal_initializer(),
                              distribute=flow.distribute.split(1))
        y = flow.matmul(x, w)
        if case == "gradient":
            y = y.with_gradient_distribute(flow.distribute.split(0))
        loss = flow.math.reduce_sum(flow.math.sigmoid(y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    x = np.random.default_rng(4).standard_normal((8, 6)).astype(np.float32)
    value = np.stack([gradient_job(x) for _ in range(3)])
    value = np.concatenate([value.ravel(), flow.get_all_variables()["w"].numpy().ravel()])
    planned = gradient_job.plan().job

if case in ("hint", "rows", "classes", "manager", "alltoall", "gradient", "gradient_plain") and rank == 0:
    np.save(os.path.join(sys.argv[2], "value.npy"), value)
    with open(os.path.join(sys.argv[2], "dump.txt"), "w") as f:
        f.write(str(planned))

if case == "shards":  # the placement's 4 devices, the weight split over 2 ranks: not one shard per rank
    flow.config.cpu_device_num(4)  # 4 devices on 2 ranks: 2 per rank, so "0:0-3" names both ranks
    @flow.global_function()
    def shards_job(labels: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        weight = flow.get_variable("fc7-weight", (8, 3), distribute=flow.distribute.split(0))
        with flow.scope.placement("cpu", "0:0-3"):
            _, _, sampled = flow.distributed_partial_fc_sample(weight, labels, num_sample=8)
        return sampled

    shards_job(np.arange(4, dtype=np.int32))

if case in ("uneven_blob", "uneven_gradient"):  # 5 rows cannot split evenly over 2 ranks
    @flow.global_function(type="train")
    def uneven_blob_job(x: tp.Numpy.Placeholder((5, 2))) -> tp.Numpy:
        w = flow.get_variable("w", (2, 4), initializer=flow.constant_initializer(0.5),
                              distribute=flow.distribute.split(1))
        y = flow.matmul(x, w)
        y = y.with_split_distribute(0) if case == "uneven_blob" else y.with_gradient_distribute(
            flow.distribute.split(0))
        loss = flow.math.reduce_sum(flow.math.sigmoid(y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    uneven_blob_job(np.ones((5, 2), dtype=np.float32))

if case == "gradient_axis":
    @flow.global_function(type="train")
    def gradient_axis_job(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        w = flow.get_variable("w", (2, 2), distribute=flow.distribute.split(1))
        loss = flow.math.reduce_sum(flow.matmul(x, w).with_gradient_distribute(flow.distribute.split(2)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    gradient_axis_job(np.ones((4, 2), dtype=np.float32))

if case == "axis":
    @flow.global_function()
    def axis_job(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        return flow.math.relu(x.with_split_distribute(2))

    axis_job(np.ones((4, 2), dtype=np.float32))

