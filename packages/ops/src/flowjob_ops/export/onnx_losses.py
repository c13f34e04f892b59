"""Losses and metrics as ONNX compositions, in the records' numerically stable forms: the cross entropies
(with their softmax output), ``smooth_l1_loss`` and ``in_top_k``. A label picks its class through a
comparison with the class indices (no gather of an index out of range: such a label adds no loss, as in the
records)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_emitter import Emitter

Converter = Callable[[Emitter, Node], None]
INT64, FLOAT = 7, 1  # onnx.TensorProto


def _picked(e: Emitter, labels: str, classes: int, stem: str) -> str:
    """labels' shape + (C,), bool: true at each label's class (nowhere for a label outside [0, C))."""
    rank = len(e.shape(labels))
    index = labels if e.dtype(labels) == np.int64 else e.add("Cast", [labels], stem=stem, to=INT64)
    column = e.unsqueeze(index, [rank], None, stem)
    positions = np.arange(classes, dtype=np.int64).reshape([1] * rank + [classes])
    return e.add("Equal", [column, e.constant(positions, f"{stem}/classes")], stem=stem)


def _sum_where(e: Emitter, mask: str, values: str, like: str, stem: str) -> str:
    """The sum over the last axis of ``values`` (shaped and typed as the job's value ``like``) where ``mask``."""
    zero = e.constant(0.0, f"{stem}/zero", e.dtype(like))
    axis = len(e.shape(like)) - 1
    return e.reduce("ReduceSum", e.add("Where", [mask, values, zero], stem=stem), [axis], False, None, stem)


def _sparse_softmax_cross_entropy(e: Emitter, node: Node) -> None:
    labels, logits = node.inputs
    loss, prob = node.outputs
    log_prob = e.softmax("LogSoftmax", logits, -1, [e.fresh(f"{node.name}/log_prob")], node.name)
    e.softmax("Softmax", logits, -1, [prob], node.name)
    picked = _sum_where(e, _picked(e, labels, e.shape(logits)[-1], node.name), log_prob, logits, node.name)
    e.add("Neg", [picked], [loss], node.name)


def _sparse_cross_entropy(e: Emitter, node: Node) -> None:
    labels, prediction = node.inputs
    one = e.constant(1.0, f"{node.name}/one", e.dtype(prediction))
    mask = _picked(e, labels, e.shape(prediction)[-1], node.name)
    # log(1) = 0 where the label is not: only the picked probability's log is summed
    logs = e.add("Log", [e.add("Where", [mask, prediction, one], stem=node.name)], stem=node.name)
    axis = len(e.shape(prediction)) - 1
    e.add("Neg", [e.reduce("ReduceSum", logs, [axis], False, None, node.name)], list(node.outputs), node.name)


def _softmax_cross_entropy(e: Emitter, node: Node) -> None:
    labels, logits = node.inputs
    loss, prob = node.outputs
    axis = len(e.shape(logits)) - 1
    log_prob = e.softmax("LogSoftmax", logits, -1, [e.fresh(f"{node.name}/log_prob")], node.name)
    e.softmax("Softmax", logits, -1, [prob], node.name)
    summed = e.reduce("ReduceSum", e.add("Mul", [labels, log_prob], stem=node.name), [axis], False, None, node.name)
    e.add("Neg", [summed], [loss], node.name)


def _sigmoid_cross_entropy(e: Emitter, node: Node) -> None:
    """max(x, 0) - x z + log(1 + exp(-|x|)), stable for any x, as the record."""
    labels, x = node.inputs
    dtype = e.dtype(x)
    if e.dtype(labels) != dtype:
        labels = e.add("Cast", [labels], stem=node.name, to=e.tensor_type(dtype))
    tail = e.add("Softplus", [e.add("Neg", [e.add("Abs", [x], stem=node.name)], stem=node.name)], stem=node.name)
    head = e.add("Sub", [e.add("Relu", [x], stem=node.name), e.add("Mul", [x, labels], stem=node.name)],
                 stem=node.name)
    e.add("Add", [head, tail], list(node.outputs), node.name)


def _smooth_l1_loss(e: Emitter, node: Node) -> None:
    prediction, label = node.inputs
    dtype = e.dtype(prediction)
    beta = float(node.attrs.get("beta", 1.0))
    d = e.add("Abs", [e.add("Sub", [prediction, label], stem=node.name)], stem=node.name)
    linear = e.add("Sub", [d, e.constant(beta / 2, f"{node.name}/half_beta", dtype)], stem=node.name)
    if beta == 0.0:
        e.add("Identity", [linear], list(node.outputs), node.name)
        return
    square = e.add("Mul", [e.add("Mul", [d, d], stem=node.name), e.constant(0.5 / beta, f"{node.name}/c", dtype)],
                   stem=node.name)
    inside = e.add("Less", [d, e.constant(beta, f"{node.name}/beta", dtype)], stem=node.name)
    e.add("Where", [inside, square, linear], list(node.outputs), node.name)


def _in_top_k(e: Emitter, node: Node) -> None:
    """A target is in the top k when fewer than k classes score strictly higher; a target out of range or a
    row holding a non-finite score says no (the record's rule)."""
    targets, predictions = node.inputs
    (rows,) = e.shape(targets)
    classes = e.shape(predictions)[1]
    stem = node.name
    if e.shape(predictions)[0] != rows:
        predictions = e.slice(predictions, [0], [rows], [0], [1], None, stem)
    mask = _picked(e, targets, classes, stem)
    score = e.unsqueeze(_sum_where(e, mask, predictions, node.inputs[1], stem), [1], None, stem)
    higher = e.reduce("ReduceSum", e.add("Cast", [e.add("Greater", [predictions, score], stem=stem)], stem=stem,
                                         to=FLOAT), [1], False, None, stem)
    within = e.add("Less", [higher, e.constant(float(node.attrs["k"]), f"{stem}/k", np.float32)], stem=stem)
    finite_cells = e.add("Not", [e.add("Or", [e.add("IsNaN", [predictions], stem=stem),
                                              e.add("IsInf", [predictions], stem=stem)], stem=stem)], stem=stem)
    all_finite = e.reduce("ReduceMin", e.add("Cast", [finite_cells], stem=stem, to=FLOAT), [1], False, None, stem)
    valid = e.reduce("ReduceMax", e.add("Cast", [mask], stem=stem, to=FLOAT), [1], False, None, stem)
    hit = e.add("And", [within, e.add("Greater", [e.add("Mul", [all_finite, valid], stem=stem),
                                                  e.constant(0.5, f"{stem}/half", np.float32)], stem=stem)],
                stem=stem)
    e.add("Cast", [hit], list(node.outputs), stem, to=e.tensor_type(e.dtype(node.outputs[0])))


def _combined_margin_loss(e: Emitter, node: Node) -> None:
    """x (N, classes...) of cosines: cos(m1 * acos(x) + m2) - m3 at each row's label column, x elsewhere."""
    x, label = node.inputs
    shape = e.shape(x)
    rows, classes = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    dtype = e.dtype(x)
    stem = node.name
    m1, m2, m3 = (float(node.attrs.get(k, d)) for k, d in (("m1", 1.0), ("m2", 0.0), ("m3", 0.0)))
    flat = e.add("Reshape", [x, e.constant([rows, classes], f"{stem}/flat", np.int64)], stem=stem)
    theta = e.add("Acos", [flat], stem=stem)
    turned = e.add("Add", [e.add("Mul", [theta, e.constant(m1, f"{stem}/m1", dtype)], stem=stem),
                           e.constant(m2, f"{stem}/m2", dtype)], stem=stem)
    margin = e.add("Sub", [e.add("Cos", [turned], stem=stem), e.constant(m3, f"{stem}/m3", dtype)], stem=stem)
    index = label if e.dtype(label) == np.int64 else e.add("Cast", [label], stem=stem, to=INT64)
    column = e.add("Reshape", [index, e.constant([rows, 1], f"{stem}/column", np.int64)], stem=stem)
    hit = e.add("Equal", [column, e.constant(np.arange(classes, dtype=np.int64)[None, :], f"{stem}/classes")],
                stem=stem)
    y = e.add("Where", [hit, margin, flat], stem=stem)
    e.add("Reshape", [y, e.constant(list(shape), f"{stem}/shape", np.int64)], list(node.outputs), stem)


CONVERTERS: dict[str, Converter] = {
    "sparse_softmax_cross_entropy": _sparse_softmax_cross_entropy, "sparse_cross_entropy": _sparse_cross_entropy,
    "softmax_cross_entropy": _softmax_cross_entropy, "sigmoid_cross_entropy": _sigmoid_cross_entropy,
    "smooth_l1_loss": _smooth_l1_loss, "in_top_k": _in_top_k, "combined_margin_loss": _combined_margin_loss,
}
"""op type -> converter, for the losses and metrics."""

__all__ = ["CONVERTERS"]
