"""Jobs whose ops run split under the layout rules of flowjob-ops: python rule_cases.py CASE OUT_DIR.

Each trains 3 steps of SGD and saves the losses and the trained variables (value.npy) and, on rank 0, the planned
job (dump.txt). softmax: a classifier head split by classes into softmax and log_softmax along the split class
axis (7 rows, which cannot split, so the gradients too run along the class axis); batched: a batched matmul split
along its batch axis; batch: two convolutions, data parallel (the batch split, the weights broadcast); conv: the
same with the first one's filters split over the ranks (its output split by channels); channels: that on a batch
of 3 (which cannot split), so the second contracts the split channels; layer_norm: a layer normalized over its
features, its rows split; batch_norm: a batch-normalized layer, its rows split (the statistics over every rank's
rows) and (batch_norm_channels, 7 rows) its channels split; cross_entropy: a classifier head split by classes
into the softmax cross entropy with probability labels; l2_normalize: a face head's class layer split by classes,
each class's weights normalized, into the sparse softmax cross entropy; pool: a convolution split by filters into
max and average pooling of its channels; concat: two products of the batch's rows joined along the features, then
a slice of the features.
"""
import os
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp

case, out = sys.argv[1], sys.argv[2]
try:
    from flowjob_mpi import world
    rank = world().rank
except ImportError:
    rank = 0
data = np.random.default_rng(7)
SGD = flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0)
normal = flow.random_normal_initializer


def train(job, *args):
    losses = np.stack([job(*args) for _ in range(3)]).ravel()
    variables = flow.get_all_variables()
    trained = [variables[name].numpy().ravel() for name in sorted(variables) if not name.startswith("System")]
    return np.concatenate([losses, *trained]), job.plan().job


if case == "softmax":
    @flow.global_function(type="train")
    def softmax_job(x: tp.Numpy.Placeholder((7, 6)), target: tp.Numpy.Placeholder((7, 8))) -> tp.Numpy:
        weight = flow.get_variable("class-weight", (6, 8), initializer=normal(),
                                   distribute=flow.distribute.split(1))  # each rank scores half the classes
        logits = flow.matmul(x, weight)
        loss = flow.math.reduce_sum(flow.nn.softmax(logits) * target) - flow.math.reduce_sum(
            flow.nn.log_softmax(logits * 0.5) * target)
        SGD.minimize(loss)
        return loss

    x, target = data.standard_normal((7, 6)).astype(np.float32), data.random((7, 8)).astype(np.float32)
    value, planned = train(softmax_job, x, target)

if case == "batched":
    @flow.global_function(type="train")
    def batched_job(x: tp.Numpy.Placeholder((4, 3, 5))) -> tp.Numpy:
        weight = flow.get_variable("batched-weight", (4, 5, 2), initializer=normal(),
                                   distribute=flow.distribute.split(0))  # one matrix per batch entry
        loss = flow.math.reduce_sum(flow.math.sigmoid(flow.matmul(x, weight)))
        SGD.minimize(loss)
        return loss

    value, planned = train(batched_job, data.standard_normal((4, 3, 5)).astype(np.float32))

if case in ("batch", "conv", "channels"):
    rows = 3 if case == "channels" else 4
    first = flow.distribute.broadcast() if case == "batch" else flow.distribute.split(0)

    @flow.global_function(type="train")
    def conv_job(x: tp.Numpy.Placeholder((rows, 2, 6, 6))) -> tp.Numpy:
        filters = flow.get_variable("conv1-weight", (4, 2, 3, 3), initializer=normal(stddev=0.2),
                                    distribute=first)  # split: each rank computes 2 of the 4 channels
        hidden = flow.nn.relu(flow.nn.conv2d(x, filters, strides=1, padding="SAME"))
        weight = flow.get_variable("conv2-weight", (3, 4, 3, 3), initializer=normal(stddev=0.2),
                                   distribute=flow.distribute.broadcast())
        loss = flow.math.reduce_mean(flow.math.square(flow.nn.conv2d(hidden, weight, strides=1, padding="VALID")))
        SGD.minimize(loss)
        return loss

    value, planned = train(conv_job, data.standard_normal((rows, 2, 6, 6)).astype(np.float32))

if case == "layer_norm":
    @flow.global_function(type="train")
    def layer_norm_job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
        weight = flow.get_variable("dense-weight", (6, 5), initializer=normal(),
                                   distribute=flow.distribute.broadcast())
        hidden = flow.layers.layer_norm(flow.matmul(x, weight), begin_norm_axis=1, begin_params_axis=1)
        loss = flow.math.reduce_sum(flow.math.sigmoid(hidden * 2.0))
        SGD.minimize(loss)
        return loss

    value, planned = train(layer_norm_job, data.standard_normal((8, 6)).astype(np.float32))

if case in ("batch_norm", "batch_norm_channels"):
    rows = 8 if case == "batch_norm" else 7

    @flow.global_function(type="train")
    def batch_norm_job(x: tp.Numpy.Placeholder((rows, 6))) -> tp.Numpy:
        weight = flow.get_variable("dense-weight", (6, 4), initializer=normal(),
                                   distribute=flow.distribute.split(1) if rows == 7 else flow.distribute.broadcast())
        hidden = flow.layers.batch_normalization(flow.matmul(x, weight), axis=1, training=True)
        loss = flow.math.reduce_sum(flow.math.sigmoid(hidden * 2.0))
        SGD.minimize(loss)
        return loss

    value, planned = train(batch_norm_job, (data.standard_normal((rows, 6)) + 0.5).astype(np.float32))

if case == "cross_entropy":
    @flow.global_function(type="train")
    def cross_entropy_job(x: tp.Numpy.Placeholder((7, 6)), labels: tp.Numpy.Placeholder((7, 8))) -> tp.Numpy:
        weight = flow.get_variable("class-weight", (6, 8), initializer=normal(),
                                   distribute=flow.distribute.split(1))
        loss = flow.nn.softmax_cross_entropy_with_logits(labels, flow.matmul(x, weight))
        SGD.minimize(loss)
        return loss

    labels = data.random((7, 8)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    value, planned = train(cross_entropy_job, data.standard_normal((7, 6)).astype(np.float32), labels)

if case == "l2_normalize":
    @flow.global_function(type="train")
    def l2_job(x: tp.Numpy.Placeholder((7, 5)), labels: tp.Numpy.Placeholder((7,), dtype=flow.int32)) -> tp.Numpy:
        weight = flow.get_variable("fc7-weight", (8, 5), initializer=normal(),
                                   distribute=flow.distribute.split(0))  # each rank holds half the classes
        normed = flow.math.l2_normalize(weight, axis=1, epsilon=1e-10)
        logits = flow.matmul(flow.math.l2_normalize(x, axis=1), normed, transpose_b=True) * 4.0
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        SGD.minimize(loss)
        return loss

    value, planned = train(l2_job, data.standard_normal((7, 5)).astype(np.float32),
                           data.integers(0, 8, 7).astype(np.int32))

if case == "pool":
    @flow.global_function(type="train")
    def pool_job(x: tp.Numpy.Placeholder((3, 2, 8, 8))) -> tp.Numpy:
        filters = flow.get_variable("conv-weight", (4, 2, 3, 3), initializer=normal(stddev=0.2),
                                    distribute=flow.distribute.split(0))
        hidden = flow.nn.relu(flow.nn.conv2d(x, filters, strides=1, padding="SAME"))
        pooled = flow.nn.avg_pool2d(flow.nn.max_pool2d(hidden, 2, 2, "VALID"), 2, 2, "VALID")
        loss = flow.math.reduce_mean(flow.math.square(pooled - 0.5))
        SGD.minimize(loss)
        return loss

    value, planned = train(pool_job, data.standard_normal((3, 2, 8, 8)).astype(np.float32))

if case == "concat":
    @flow.global_function(type="train")
    def concat_job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
        parts = [flow.matmul(x, flow.get_variable(f"part{k}-weight", (6, 3 - k), initializer=normal(),
                                                  distribute=flow.distribute.broadcast())) for k in range(2)]
        joined = flow.slice(flow.concat(parts, axis=1), begin=[None, 1], size=[None, 3])
        loss = flow.math.reduce_mean(flow.math.sigmoid(joined))
        SGD.minimize(loss)
        return loss

    value, planned = train(concat_job, data.standard_normal((8, 6)).astype(np.float32))

if rank == 0:
    np.save(os.path.join(out, "value.npy"), value)
    with open(os.path.join(out, "dump.txt"), "w") as f:
        f.write(str(planned))
