"""ResNet-50 and a small BERT in flowjob, written as a legacy OneFlow v0.4 user writes them.

ResNet-50 follows the benchmark repository's shapes (bottleneck v1.5: the stride on the 3x3
convolution; variables by ``flow.get_variable``, ``flow.nn.conv2d``, ``flow.layers.batch_normalization``);
the BERT is a pretraining step (masked-LM over gathered positions plus next-sentence) with a few layers.
"""
from __future__ import annotations

import oneflow as flow

RESNET_STAGES = [(64, 3), (128, 4), (256, 6), (512, 3)]
RESNET_BATCH = 16
BERT_BATCH = 8
BERT = {"layers": 2, "hidden": 256, "heads": 4, "seq": 128, "vocab": 30522, "predictions": 20, "ffn": 1024}


def _conv(x, filters: int, kernel: int, stride: int, name: str):
    weight = flow.get_variable(
        name + "-weight", shape=(filters, x.shape[1], kernel, kernel), dtype=x.dtype,
        initializer=flow.variance_scaling_initializer(2, "fan_in", "random_normal", data_format="NCHW"))
    return flow.nn.conv2d(x, weight, strides=stride, padding="SAME", data_format="NCHW", name=name)


def _conv_bn(x, filters: int, kernel: int, stride: int, name: str, relu: bool = True):
    y = flow.layers.batch_normalization(_conv(x, filters, kernel, stride, name), axis=1, momentum=0.9,
                                        epsilon=1e-5, training=True, name=name + "_bn")
    return flow.nn.relu(y) if relu else y


def resnet50(images, num_classes: int = 1000):
    x = _conv_bn(images, 64, 7, 2, "conv1")
    x = flow.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME", data_format="NCHW", name="pool1")
    for stage, (width, blocks) in enumerate(RESNET_STAGES):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            name = f"res{stage + 2}_{i}"
            y = _conv_bn(x, width, 1, 1, name + "_a")
            y = _conv_bn(y, width, 3, stride, name + "_b")
            y = _conv_bn(y, width * 4, 1, 1, name + "_c", relu=False)
            if i == 0:
                x = _conv_bn(x, width * 4, 1, stride, name + "_proj", relu=False)
            x = flow.nn.relu(y + x)
    x = flow.nn.avg_pool2d(x, ksize=x.shape[2], strides=1, padding="VALID", data_format="NCHW", name="pool5")
    x = flow.reshape(x, (x.shape[0], -1))
    return flow.layers.dense(x, num_classes, kernel_initializer=flow.variance_scaling_initializer(
        2, "fan_in", "random_normal"), name="fc1001")


def _dense(x, units: int, name: str, activation=None):
    return flow.layers.dense(x, units, activation=activation, name=name,
                             kernel_initializer=flow.truncated_normal_initializer(stddev=0.02))


def _attention(x, batch: int, name: str):
    """x: (batch * seq, hidden) -> (batch * seq, hidden), full self-attention with ``heads`` heads."""
    seq, hidden, heads = BERT["seq"], BERT["hidden"], BERT["heads"]

    def split(t):  # (b*s, h) -> (b, heads, s, h/heads)
        return flow.transpose(flow.reshape(t, (batch, seq, heads, hidden // heads)), perm=[0, 2, 1, 3])

    q = split(_dense(x, hidden, name + "-query"))
    k = split(_dense(x, hidden, name + "-key"))
    v = split(_dense(x, hidden, name + "-value"))
    scores = flow.math.multiply(flow.matmul(q, k, transpose_b=True), 1.0 / (hidden // heads) ** 0.5)
    context = flow.matmul(flow.nn.softmax(scores), v)
    context = flow.reshape(flow.transpose(context, perm=[0, 2, 1, 3]), (batch * seq, hidden))
    return _dense(context, hidden, name + "-output")


def bert_pretrain(tokens, positions, mlm_labels, nsp_labels, batch: int):
    seq, hidden, vocab = BERT["seq"], BERT["hidden"], BERT["vocab"]
    word_table = flow.get_variable("word_embeddings", shape=(vocab, hidden),
                                   initializer=flow.truncated_normal_initializer(stddev=0.02))
    pos_table = flow.get_variable("position_embeddings", shape=(1, seq, hidden),
                                  initializer=flow.truncated_normal_initializer(stddev=0.02))
    x = flow.gather(word_table, tokens) + pos_table
    x = flow.reshape(flow.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1, name="emb_ln"),
                     (batch * seq, hidden))
    for layer in range(BERT["layers"]):
        name = f"layer_{layer}"
        x = flow.layers.layer_norm(x + _attention(x, batch, name + "-attention"), begin_norm_axis=-1,
                                   begin_params_axis=-1, name=name + "-attention_ln")
        ffn = _dense(_dense(x, BERT["ffn"], name + "-intermediate", activation=flow.math.gelu), hidden,
                     name + "-ffn_output")
        x = flow.layers.layer_norm(x + ffn, begin_norm_axis=-1, begin_params_axis=-1, name=name + "-output_ln")
    # masked LM over the gathered positions; the output projection shares the word embeddings
    picked = flow.gather(x, flow.reshape(positions, (-1,)))
    picked = flow.layers.layer_norm(_dense(picked, hidden, "mlm-transform", activation=flow.math.gelu),
                                    begin_norm_axis=-1, begin_params_axis=-1, name="mlm-ln")
    mlm_logits = flow.matmul(picked, word_table, transpose_b=True)
    mlm_loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(
        flow.reshape(mlm_labels, (-1,)), mlm_logits))
    first = flow.slice(flow.reshape(x, (batch, seq, hidden)), [None, 0, 0], [None, 1, hidden])
    pooled = _dense(flow.reshape(first, (batch, hidden)), hidden, "pooler", activation=flow.math.tanh)
    nsp_loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(
        nsp_labels, _dense(pooled, 2, "nsp")))
    return mlm_loss + nsp_loss
