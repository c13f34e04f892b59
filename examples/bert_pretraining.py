"""BERT pretraining (masked-LM + next-sentence losses) in the style of the OneFlow v0.4 benchmark, small.

    python examples/bert_pretraining.py --make_synthetic_data ./bert_data
    python examples/bert_pretraining.py --data_dir ./bert_data --iter_num 200 --model_save_dir ./bert_model

The first command writes OFRecord part files of the raw int32/float features a BERT pretraining
reader decodes (input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
masked_lm_weights, next_sentence_labels) and exits. Its "sentences" are runs of consecutive token
ids, so a masked token can be told from its neighbours, and the second sentence of a pair either
continues the first (next_sentence_labels 0) or starts anywhere (1).

The second trains a BERT encoder on them: word, position and token-type embeddings, transformer
layers (self-attention over the input mask, a GELU feed-forward block, layer norm after each),
the masked-LM head on the gathered positions (its output weights are the word embeddings) and the
next-sentence head on the pooled first token. AdamW with linear warm-up then polynomial decay,
weight decay on everything but biases and layer norms, gradient clipping, and with
--loss_scale dynamic a dynamic loss scale. The losses are printed every
--loss_print_every_n_iter steps; --model_save_dir saves a checkpoint at the end and
--model_load_dir starts from one.
"""
import argparse
import math
import os
import struct

import numpy as np
import oneflow as flow
from oneflow.core.record import record_pb2

parser = argparse.ArgumentParser()
parser.add_argument("--make_synthetic_data", metavar="DIR", default=None,
                    help="write synthetic records into DIR and exit")
parser.add_argument("--num_examples", type=int, default=256, help="records --make_synthetic_data writes")
parser.add_argument("--data_dir", default="./bert_data")
parser.add_argument("--data_part_num", type=int, default=1)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--iter_num", type=int, default=100)
parser.add_argument("--warmup_proportion", type=float, default=0.1)
parser.add_argument("--learning_rate", type=float, default=1e-3)
parser.add_argument("--weight_decay_rate", type=float, default=0.01)
parser.add_argument("--loss_scale", choices=["none", "dynamic"], default="none")
parser.add_argument("--seq_length", type=int, default=32)
parser.add_argument("--max_predictions_per_seq", type=int, default=5)
parser.add_argument("--vocab_size", type=int, default=64)
parser.add_argument("--type_vocab_size", type=int, default=2)
parser.add_argument("--max_position_embeddings", type=int, default=64)
parser.add_argument("--hidden_size", type=int, default=64)
parser.add_argument("--num_hidden_layers", type=int, default=2)
parser.add_argument("--num_attention_heads", type=int, default=2)
parser.add_argument("--intermediate_size", type=int, default=128)
parser.add_argument("--hidden_dropout_prob", type=float, default=0.1)
parser.add_argument("--attention_probs_dropout_prob", type=float, default=0.1)
parser.add_argument("--initializer_range", type=float, default=0.02)
parser.add_argument("--loss_print_every_n_iter", type=int, default=10)
parser.add_argument("--model_save_dir", default="")
parser.add_argument("--model_load_dir", default="")
args = parser.parse_args()

PAD, CLS, SEP, MASK, FIRST_WORD = 0, 1, 2, 3, 4


# synthetic records ------------------------------------------------------------------------------
def make_example(rng):
    """One sentence pair as the features a BERT pretraining reader decodes."""
    words = args.vocab_size - FIRST_WORD
    body = args.seq_length - 3  # CLS a SEP b SEP
    len_a = int(rng.randint(2, body - 1))
    len_b = int(rng.randint(1, body - len_a + 1))
    start_a = int(rng.randint(words))
    is_random = int(rng.rand() < 0.5)
    start_b = int(rng.randint(words)) if is_random else start_a + len_a
    sent_a = [FIRST_WORD + (start_a + i) % words for i in range(len_a)]
    sent_b = [FIRST_WORD + (start_b + i) % words for i in range(len_b)]
    tokens = [CLS] + sent_a + [SEP] + sent_b + [SEP]
    used = len(tokens)
    segment = [0] * (len_a + 2) + [1] * (len_b + 1)
    word_positions = [i for i, t in enumerate(tokens) if t >= FIRST_WORD]
    count = min(args.max_predictions_per_seq, max(1, int(round(len(word_positions) * 0.15))))
    positions = sorted(rng.choice(word_positions, count, replace=False).tolist())
    labels = [tokens[p] for p in positions]
    for p in positions:
        tokens[p] = MASK
    pad = args.seq_length - used
    fill = args.max_predictions_per_seq - count
    return {
        "input_ids": tokens + [PAD] * pad,
        "input_mask": [1] * used + [0] * pad,
        "segment_ids": segment + [0] * pad,
        "masked_lm_positions": positions + [0] * fill,
        "masked_lm_ids": labels + [0] * fill,
        "masked_lm_weights": [1.0] * count + [0.0] * fill,
        "next_sentence_labels": [is_random],
    }


def write_part(path, examples):
    """One part file: per record its length as an 8-byte little-endian int, then the OFRecord."""
    with open(path + ".tmp", "wb") as f:
        for example in examples:
            record = record_pb2.OFRecord()
            for key, values in example.items():
                if key == "masked_lm_weights":
                    record.feature[key].float_list.value.extend(values)
                else:
                    record.feature[key].int32_list.value.extend(values)
            payload = record.SerializeToString()
            f.write(struct.pack("<q", len(payload)))
            f.write(payload)
    os.replace(path + ".tmp", path)


def make_synthetic_data(folder):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.RandomState(2021)
    examples = [make_example(rng) for _ in range(args.num_examples)]
    for part in range(args.data_part_num):
        write_part(os.path.join(folder, "part-%d" % part), examples[part::args.data_part_num])
    print("wrote %d synthetic records in %d part(s) to %s" % (len(examples), args.data_part_num, folder))


# the model ---------------------------------------------------------------------------------------
def init():
    return flow.truncated_normal(args.initializer_range)


def dense(x, units, name, activation=None):
    return flow.layers.dense(x, units, activation=activation, kernel_initializer=init(),
                             bias_initializer=flow.zeros_initializer(), name=name)


def layer_norm(x, name):
    return flow.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-12, name=name)


def dropout(x, rate):
    return flow.nn.dropout(x, rate=rate) if rate > 0 else x


def embeddings(input_ids, segment_ids):
    hidden = args.hidden_size
    with flow.scope.namespace("bert-embeddings"):
        word_table = flow.get_variable("word_embeddings", shape=(args.vocab_size, hidden), initializer=init())
        type_table = flow.get_variable("token_type_embeddings", shape=(args.type_vocab_size, hidden),
                                       initializer=init())
        position_table = flow.get_variable("position_embeddings", shape=(args.max_position_embeddings, hidden),
                                           initializer=init())
        positions = flow.slice(position_table, [0, 0], [args.seq_length, -1])
        out = flow.gather(word_table, input_ids) + flow.gather(type_table, segment_ids)
        out = out + flow.reshape(positions, [1, args.seq_length, hidden])
        out = dropout(layer_norm(out, "LayerNorm"), args.hidden_dropout_prob)
    return out, word_table


def attention_bias(input_mask):
    """0 where a key may be attended, -10000 where it is padding: (batch, 1, 1, seq)."""
    mask = flow.cast(flow.reshape(input_mask, [-1, 1, 1, args.seq_length]), dtype=flow.float)
    return (1.0 - mask) * -10000.0


def self_attention(x, bias):
    """x: (batch * seq, hidden) -> the same shape."""
    heads = args.num_attention_heads
    size = args.hidden_size // heads

    def split_heads(blob):  # (batch * seq, hidden) -> (batch, heads, seq, size)
        blob = flow.reshape(blob, [-1, args.seq_length, heads, size])
        return flow.transpose(blob, perm=[0, 2, 1, 3])

    query = split_heads(dense(x, args.hidden_size, "query"))
    key = split_heads(dense(x, args.hidden_size, "key"))
    value = split_heads(dense(x, args.hidden_size, "value"))
    scores = flow.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(size)) + bias
    probs = dropout(flow.nn.softmax(scores), args.attention_probs_dropout_prob)
    context = flow.transpose(flow.matmul(probs, value), perm=[0, 2, 1, 3])
    return flow.reshape(context, [-1, args.hidden_size])


def transformer(x, bias):
    x = flow.reshape(x, [-1, args.hidden_size])
    for layer in range(args.num_hidden_layers):
        with flow.scope.namespace("bert-encoder-layer%d" % layer):
            with flow.scope.namespace("attention"):
                attended = dense(self_attention(x, bias), args.hidden_size, "output")
                x = layer_norm(x + dropout(attended, args.hidden_dropout_prob), "LayerNorm")
            with flow.scope.namespace("feed_forward"):
                inner = dense(x, args.intermediate_size, "intermediate", activation=flow.math.gelu)
                out = dense(inner, args.hidden_size, "output")
                x = layer_norm(x + dropout(out, args.hidden_dropout_prob), "LayerNorm")
    return flow.reshape(x, [-1, args.seq_length, args.hidden_size])


def masked_lm_loss(sequence, word_table, positions, label_ids, label_weights):
    with flow.scope.namespace("cls-predictions"):
        # (batch, predictions, hidden): each example's rows at its masked positions
        picked = flow.reshape(flow.gather(sequence, positions, batch_dims=1), [-1, args.hidden_size])
        picked = layer_norm(dense(picked, args.hidden_size, "transform", activation=flow.math.gelu), "LayerNorm")
        bias = flow.get_variable("output_bias", shape=(args.vocab_size,), initializer=flow.zeros_initializer())
        logits = flow.nn.bias_add(flow.matmul(picked, word_table, transpose_b=True), bias)
        per_prediction = flow.nn.sparse_softmax_cross_entropy_with_logits(
            labels=flow.reshape(label_ids, [-1]), logits=logits)
        weights = flow.reshape(label_weights, [-1])
        return flow.math.reduce_sum(per_prediction * weights) / (flow.math.reduce_sum(weights) + 1e-5)


def next_sentence_loss(sequence, labels):
    with flow.scope.namespace("cls-seq_relationship"):
        first = flow.reshape(flow.slice(sequence, [None, 0, 0], [None, 1, -1]), [-1, args.hidden_size])
        pooled = dense(first, args.hidden_size, "pooler", activation=flow.math.tanh)
        logits = dense(pooled, 2, "output")
        losses = flow.nn.sparse_softmax_cross_entropy_with_logits(labels=flow.reshape(labels, [-1]), logits=logits)
        return flow.math.reduce_mean(losses)


def decoders():
    with flow.scope.placement("cpu", "0:0"):
        reader = flow.data.ofrecord_reader(args.data_dir, batch_size=args.batch_size,
                                           data_part_num=args.data_part_num, random_shuffle=True,
                                           shuffle_after_epoch=True)

        def raw(name, length, dtype=flow.int32):
            return flow.data.OFRecordRawDecoder(reader, name, shape=[length], dtype=dtype)

        return {
            "input_ids": raw("input_ids", args.seq_length),
            "input_mask": raw("input_mask", args.seq_length),
            "segment_ids": raw("segment_ids", args.seq_length),
            "masked_lm_positions": raw("masked_lm_positions", args.max_predictions_per_seq),
            "masked_lm_ids": raw("masked_lm_ids", args.max_predictions_per_seq),
            "masked_lm_weights": raw("masked_lm_weights", args.max_predictions_per_seq, flow.float),
            "next_sentence_labels": raw("next_sentence_labels", 1),
        }


def optimizer():
    warmup_steps = int(args.iter_num * args.warmup_proportion)
    schedule = flow.optimizer.PolynomialScheduler(
        args.learning_rate, steps=args.iter_num, end_learning_rate=0.0,
        warmup=flow.optimizer.warmup.linear(warmup_steps, 0) if warmup_steps > 0 else None)
    loss_scale = None
    if args.loss_scale == "dynamic":
        loss_scale = flow.optimizer.loss_scale.dynamic_loss_scale(initial_loss_scale=2.0 ** 16,
                                                                  increment_period=1000)
    return flow.optimizer.AdamW(schedule, epsilon=1e-6, weight_decay=args.weight_decay_rate,
                                weight_decay_excludes=["bias", "LayerNorm"],
                                grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0),
                                loss_scale_policy=loss_scale)


func_config = flow.FunctionConfig()
func_config.default_data_type(flow.float)


@flow.global_function(type="train", function_config=func_config)
def pretrain_job():
    blobs = decoders()
    sequence, word_table = embeddings(blobs["input_ids"], blobs["segment_ids"])
    sequence = transformer(sequence, attention_bias(blobs["input_mask"]))
    mlm = masked_lm_loss(sequence, word_table, blobs["masked_lm_positions"], blobs["masked_lm_ids"],
                         blobs["masked_lm_weights"])
    nsp = next_sentence_loss(sequence, blobs["next_sentence_labels"])
    total = mlm + nsp
    optimizer().minimize(total)
    return total, mlm, nsp


def print_losses(step):
    def callback(losses):
        total, mlm, nsp = (float(blob.numpy().mean()) for blob in losses)
        print("step %d: total_loss %.4f, mlm_loss %.4f, nsp_loss %.4f" % (step, total, mlm, nsp), flush=True)
    return callback


def main():
    if args.make_synthetic_data:
        make_synthetic_data(args.make_synthetic_data)
        return
    if args.model_load_dir:
        flow.load_variables(flow.checkpoint.get(args.model_load_dir))
        print("restored the model from", args.model_load_dir)
    for step in range(args.iter_num):
        job = pretrain_job()
        if (step + 1) % args.loss_print_every_n_iter == 0 or step == 0:
            job.async_get(print_losses(step))
    if args.model_save_dir:
        flow.checkpoint.save(args.model_save_dir)
        print("saved the model to", args.model_save_dir)


if __name__ == "__main__":
    main()
