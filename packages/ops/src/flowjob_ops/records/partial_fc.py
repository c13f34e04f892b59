"""``distributed_partial_fc_sample``: legacy v0.4's class sampling for partial-FC training.

Inputs (weight (C, ...), label (N,) int); attribute ``num_sample``. Legacy's kernel gives every class a
random key in [0, C), and each class that appears in the labels the key ``label - C`` (below every random
one); the classes sorted by key (a stable sort) are the positives in label order, then the negatives in
random order. The first ``num_sample`` of them are ``sampled_label`` (their class ids) and their weight rows
``sampled_weight``; ``mapped_label`` gives each label its index among the sampled classes, that is the rank
of its class among the distinct labels. The weight's gradient scatters the sampled rows' gradient back
(``unsorted_segment_sum_like`` over ``sampled_label``), as legacy's.

On one device this is legacy's rule exactly (its random keys came from cuRAND, so which negatives are drawn
differs); legacy's several-device form split the classes over devices, which the consistent view here does
not split.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "distributed_partial_fc_sample"
    if len(inputs) != 2:
        raise ShapeError(f"{op} takes weight and label, got {len(inputs)} inputs")
    weight, label = inputs
    if not weight.shape:
        raise ShapeError(f"{op}: weight must have rank >= 1 (classes on axis 0), got {weight}")
    if weight.dtype.kind != "f":
        raise ShapeError(f"{op}: weight must be floating, got {weight.dtype}")
    if len(label.shape) != 1 or label.dtype.kind not in "iu":
        raise ShapeError(f"{op}: label must be a 1-d integer blob, got {label}")
    num_sample = attrs.get("num_sample")
    if isinstance(num_sample, bool) or not isinstance(num_sample, (int, np.integer)) \
            or not 1 <= num_sample <= weight.shape[0]:
        raise ShapeError(f"{op}: num_sample must be an int in [1, {weight.shape[0]}] (the classes), got {num_sample!r}")
    return [label, BlobSpec((int(num_sample),), label.dtype),
            BlobSpec((int(num_sample),) + tuple(weight.shape[1:]), weight.dtype)]


def sample_classes(keys: np.ndarray, label: np.ndarray, num_sample: int) -> tuple[np.ndarray, np.ndarray]:
    """(sampled class ids, mapped labels) from one random key in [0, C) per class: legacy's rule."""
    classes = keys.shape[0]
    keys = keys.astype(np.int64)
    inside = label[(label >= 0) & (label < classes)].astype(np.int64)
    keys[inside] = inside - classes  # positives first, in label order
    sampled = np.argsort(keys, kind="stable")[:num_sample]
    distinct = np.unique(label)
    return sampled, np.searchsorted(distinct, label)


def _kernel(ctx: KernelContext) -> Any:
    xp, to_host = ctx.xp, ctx.backend.to_host
    rng = ctx.rng(ctx.attrs.get("seed"))
    classes = ctx.inputs[0].shape[0]
    num_sample = int(ctx.attrs["num_sample"])
    mapped_out, sampled_out, weight_out = ctx.out(0), ctx.out(1), ctx.out(2)
    uniform = ctx.workspace((classes,), np.float64)

    def run(weight: Any, label: Any) -> tuple[Any, Any, Any]:
        # a key in [0, C) per class from the backend's uniform draws (the stream every backend gives)
        rng.random(out=uniform, dtype=np.float64)
        keys = np.floor(to_host(uniform) * classes).astype(np.int64)
        sampled, mapped = sample_classes(keys, to_host(label), num_sample)
        sampled_out[...] = xp.asarray(sampled)
        mapped_out[...] = xp.asarray(mapped)
        xp.take(weight, sampled_out, axis=0, out=weight_out)
        return mapped_out, sampled_out, weight_out

    return run


def _grad(ctx: GradContext) -> list[Any]:
    weight_grad = ctx.out_grads[2]
    if weight_grad is None:  # the loss reads no sampled weight row
        return [None, None]
    return [ctx.apply("unsorted_segment_sum_like", [weight_grad, ctx.outputs[1], ctx.inputs[0]], {"axis": 0}), None]


DISTRIBUTED_PARTIAL_FC_SAMPLE = OpDef(
    "distributed_partial_fc_sample", _infer, kernel=_kernel, grad=_grad, name_prefix="DistributedPartialFcSample",
    output_names=("mapped_label", "sampled_label", "sampled_weight"), input_names=("weight", "label"),
    attr_names=("num_sample", "seed"),
    doc="sample num_sample classes (every labelled one first, then random negatives), their weight rows, and "
        "each label's index among them", amp="black")

OPS = (DISTRIBUTED_PARTIAL_FC_SAMPLE,)
