"""Wide & Deep click-through prediction in the style of the OneFlow v0.4 benchmark, on synthetic data.

    python examples/wide_deep.py --dataset_format ofrecord --data_dir ./wdl_data --max_iter 300

Each sample has a click label, dense features and two groups of categorical ids: the wide part
is a linear model over its ids (an embedding of width 1), the deep part embeds its ids, joins
them with the dense features and runs an MLP. Embedding rows are looked up with flow.gather and
updated sparsely (only the rows a batch used) through indexed_slices_optimizer_conf + LazyAdam.

--dataset_format ofrecord reads part files with flow.data.ofrecord_reader, writing a synthetic
set in --data_dir first when it holds none; --dataset_format numpy feeds the same kind of
batches through tp.Numpy placeholders. Every --loss_print_every_n_iter steps the mean train loss
is printed; every --eval_interval steps an evaluation prints its loss and AUC.
"""
import argparse
import os
import struct
from typing import Tuple

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from oneflow.core.record import record_pb2

parser = argparse.ArgumentParser()
parser.add_argument("--dataset_format", default="ofrecord", choices=["ofrecord", "numpy"])
parser.add_argument("--data_dir", default="./wdl_data")
parser.add_argument("--num_train_examples", type=int, default=4096)
parser.add_argument("--num_eval_examples", type=int, default=1024)
parser.add_argument("--batch_size", type=int, default=256)
parser.add_argument("--learning_rate", type=float, default=1e-3)
parser.add_argument("--wide_vocab_size", type=int, default=10000)
parser.add_argument("--deep_vocab_size", type=int, default=10000)
parser.add_argument("--deep_embedding_vec_size", type=int, default=16)
parser.add_argument("--deep_dropout_rate", type=float, default=0.5)
parser.add_argument("--num_dense_fields", type=int, default=13)
parser.add_argument("--num_wide_sparse_fields", type=int, default=2)
parser.add_argument("--num_deep_sparse_fields", type=int, default=26)
parser.add_argument("--hidden_units_num", type=int, default=3)
parser.add_argument("--hidden_size", type=int, default=256)
parser.add_argument("--max_iter", type=int, default=300)
parser.add_argument("--loss_print_every_n_iter", type=int, default=50)
parser.add_argument("--eval_interval", type=int, default=100)
parser.add_argument("--eval_batchs", type=int, default=4)
parser.add_argument("--model_save_dir", default="")
FLAGS = parser.parse_args()


# synthetic data: a click is likelier for a high first dense feature and for even wide ids --------
def make_samples(n, seed):
    rng = np.random.RandomState(seed)
    dense = rng.uniform(0, 1, (n, FLAGS.num_dense_fields)).astype(np.float32)
    wide = rng.randint(0, FLAGS.wide_vocab_size, (n, FLAGS.num_wide_sparse_fields)).astype(np.int32)
    deep = rng.randint(0, FLAGS.deep_vocab_size, (n, FLAGS.num_deep_sparse_fields)).astype(np.int32)
    score = 3.0 * (dense[:, 0] - 0.5) + 1.5 * ((wide % 2 == 0).mean(axis=1) - 0.5)
    labels = (rng.uniform(0, 1, n) < 1 / (1 + np.exp(-4 * score))).astype(np.int32).reshape(n, 1)
    return labels, dense, wide, deep


def write_ofrecord_part(path, samples):
    """One part file: per record an 8-byte length, then the serialized OFRecord."""
    with open(path + ".tmp", "wb") as f:
        for labels, dense, wide, deep in zip(*samples):
            record = record_pb2.OFRecord()
            record.feature["labels"].int32_list.value.extend(labels.tolist())
            record.feature["dense_fields"].float_list.value.extend(dense.tolist())
            record.feature["wide_sparse_fields"].int32_list.value.extend(wide.tolist())
            record.feature["deep_sparse_fields"].int32_list.value.extend(deep.tolist())
            payload = record.SerializeToString()
            f.write(struct.pack("<q", len(payload)))
            f.write(payload)
    os.replace(path + ".tmp", path)


def prepare_ofrecord(split, n, seed):
    folder = os.path.join(FLAGS.data_dir, split)
    if not os.path.isdir(folder) or not os.listdir(folder):
        os.makedirs(folder, exist_ok=True)
        write_ofrecord_part(os.path.join(folder, "part-00000"), make_samples(n, seed))
        print("wrote synthetic", split, "records to", folder)
    return folder


# the model --------------------------------------------------------------------------------------
def ofrecord_inputs(folder, shuffle):
    ofrecord = flow.data.ofrecord_reader(folder, batch_size=FLAGS.batch_size, data_part_num=1,
                                         part_name_suffix_length=5, random_shuffle=shuffle,
                                         shuffle_after_epoch=shuffle)

    def field(name, width, dtype=flow.int32):
        return flow.data.OFRecordRawDecoder(ofrecord, name, shape=(width,), dtype=dtype)

    return (field("labels", 1), field("dense_fields", FLAGS.num_dense_fields, flow.float),
            field("wide_sparse_fields", FLAGS.num_wide_sparse_fields),
            field("deep_sparse_fields", FLAGS.num_deep_sparse_fields))


def embedding(name, ids, vocab_size, width):
    table = flow.get_variable(name=name, shape=(vocab_size, width),
                              initializer=flow.random_uniform_initializer(minval=-0.05, maxval=0.05))
    rows = flow.gather(params=table, indices=ids)  # (batch, fields, width)
    return flow.reshape(rows, shape=(-1, rows.shape[-2] * rows.shape[-1]))


def wide_and_deep(dense_fields, wide_sparse_fields, deep_sparse_fields, training):
    wide = embedding("wide_embedding", wide_sparse_fields, FLAGS.wide_vocab_size, 1)
    wide_scores = flow.math.reduce_sum(wide, axis=[1], keepdims=True)
    deep = embedding("deep_embedding", deep_sparse_fields, FLAGS.deep_vocab_size, FLAGS.deep_embedding_vec_size)
    features = flow.concat([deep, dense_fields], axis=1)
    for i in range(FLAGS.hidden_units_num):
        features = flow.layers.dense(features, units=FLAGS.hidden_size, activation=flow.math.relu,
                                     kernel_initializer=flow.glorot_uniform_initializer(),
                                     bias_initializer=flow.constant_initializer(0.0), name="fc{}".format(i + 1))
        if training:
            features = flow.nn.dropout(features, rate=FLAGS.deep_dropout_rate)
    deep_scores = flow.layers.dense(features, units=1, kernel_initializer=flow.glorot_uniform_initializer(),
                                    bias_initializer=flow.constant_initializer(0.0),
                                    name="fc{}".format(FLAGS.hidden_units_num + 1))
    return wide_scores + deep_scores


def train_config():
    config = flow.FunctionConfig()
    config.default_data_type(flow.float)
    # rows of these tables get updates only where a batch looked them up
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["wide_embedding", "deep_embedding"])))
    return config


def train_step(labels, dense, wide, deep):
    logits = wide_and_deep(dense, wide, deep, training=True)
    loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [FLAGS.learning_rate])).minimize(loss)
    return loss


def eval_step(labels, dense, wide, deep):
    logits = wide_and_deep(dense, wide, deep, training=False)
    loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return loss, flow.math.sigmoid(logits), labels


def define_jobs():
    b = FLAGS.batch_size
    if FLAGS.dataset_format == "ofrecord":
        train_dir = prepare_ofrecord("train", FLAGS.num_train_examples, 0)
        eval_dir = prepare_ofrecord("eval", FLAGS.num_eval_examples, 1)

        @flow.global_function("train", train_config())
        def train_job() -> tp.Numpy:
            return train_step(*ofrecord_inputs(train_dir, shuffle=True))

        @flow.global_function("predict")
        def eval_job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
            return eval_step(*ofrecord_inputs(eval_dir, shuffle=False))

        return (lambda step: train_job()), (lambda step: eval_job())

    Labels = tp.Numpy.Placeholder((b, 1), dtype=flow.int32)
    Dense = tp.Numpy.Placeholder((b, FLAGS.num_dense_fields), dtype=flow.float)
    Wide = tp.Numpy.Placeholder((b, FLAGS.num_wide_sparse_fields), dtype=flow.int32)
    Deep = tp.Numpy.Placeholder((b, FLAGS.num_deep_sparse_fields), dtype=flow.int32)

    @flow.global_function("train", train_config())
    def train_job(labels: Labels, dense: Dense, wide: Wide, deep: Deep) -> tp.Numpy:
        return train_step(labels, dense, wide, deep)

    @flow.global_function("predict")
    def eval_job(labels: Labels, dense: Dense, wide: Wide, deep: Deep) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return eval_step(labels, dense, wide, deep)

    train_set = make_samples(FLAGS.num_train_examples, 0)
    eval_set = make_samples(FLAGS.num_eval_examples, 1)

    def batch(samples, step):
        start = (step * b) % (len(samples[0]) - b + 1)
        return [a[start:start + b] for a in samples]

    return (lambda step: train_job(*batch(train_set, step))), (lambda step: eval_job(*batch(eval_set, step)))


def auc(labels, scores):
    """Area under the ROC curve from ranks (ties averaged): the chance a click outranks a non-click."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(sorted_scores):  # average the ranks of tied scores
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    positives = labels == 1
    n_pos, n_neg = positives.sum(), (~positives).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main():
    run_train, run_eval = define_jobs()
    total = 0.0
    for i in range(FLAGS.max_iter):
        total += float(run_train(i))
        if (i + 1) % FLAGS.loss_print_every_n_iter == 0:
            print("iter {} loss {:.6f}".format(i + 1, total / FLAGS.loss_print_every_n_iter), flush=True)
            total = 0.0
        if (i + 1) % FLAGS.eval_interval == 0:
            losses, scores, labels = [], [], []
            for j in range(FLAGS.eval_batchs):
                loss, pred, label = run_eval(j)
                losses.append(loss.mean())
                scores.append(pred.ravel())
                labels.append(label.ravel())
            print("iter {} eval_loss {:.6f} eval_auc {:.4f}".format(
                i + 1, float(np.mean(losses)), auc(np.concatenate(labels), np.concatenate(scores))), flush=True)
    if FLAGS.model_save_dir:
        flow.checkpoint.save(FLAGS.model_save_dir)
        print("saved", FLAGS.model_save_dir)


if __name__ == "__main__":
    main()
