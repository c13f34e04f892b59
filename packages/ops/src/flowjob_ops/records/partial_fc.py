"""``distributed_partial_fc_sample``: legacy v0.4's class sampling for partial-FC training.

Inputs (weight (C, ...), label (N,) int); attribute ``num_sample``. Legacy's kernel gives every class a
random key in [0, C), and each class that appears in the labels the key ``label - C`` (below every random
one); the classes sorted by key (a stable sort) are the positives in label order, then the negatives in
random order. The first ``num_sample`` of them are ``sampled_label`` (their class ids) and their weight rows
``sampled_weight``; ``mapped_label`` gives each label its index among the sampled classes, that is the rank
of its class among the distinct labels. The weight's gradient scatters the sampled rows' gradient back
(``unsorted_segment_sum_like`` over ``sampled_label``), as legacy's.

With ``parallel_num`` p > 1 (legacy's weight split over p devices by class) the classes fall into p equal
shards and each shard samples ``num_sample / p`` of its own classes by that rule; ``sampled_label`` is the
shards' samples one after another and ``mapped_label`` indexes into it, as legacy's devices gave them.
Legacy's random keys came from cuRAND, so which negatives are drawn differs; the rule is the same.
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
    shards = attrs.get("parallel_num", 1)
    if isinstance(shards, bool) or not isinstance(shards, (int, np.integer)) or shards < 1 \
            or weight.shape[0] % shards or num_sample % shards:
        raise ShapeError(f"{op}: parallel_num {shards!r} must be an int >= 1 dividing the classes ({weight.shape[0]}) "
                         f"and num_sample ({num_sample})")
    return [label, BlobSpec((int(num_sample),), label.dtype),
            BlobSpec((int(num_sample),) + tuple(weight.shape[1:]), weight.dtype)]


def sample_classes(keys: np.ndarray, label: np.ndarray, num_sample: int,
                   shards: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(sampled class ids, mapped labels) from one random key in [0, C / shards) per class: legacy's rule, per
    shard of C / shards classes, each giving num_sample / shards."""
    classes = keys.shape[0]
    size, per_shard = classes // shards, num_sample // shards
    keys = keys.astype(np.int64)
    inside = np.unique(label[(label >= 0) & (label < classes)].astype(np.int64))
    keys[inside] = inside % size - size  # positives first in their shard, in label order
    order = [lower + np.argsort(keys[lower:lower + size], kind="stable")[:per_shard]
             for lower in range(0, classes, size)]
    sampled = np.concatenate(order)
    # a label's place: its rank among its shard's distinct labels, after the earlier shards' samples
    shard = np.clip(label.astype(np.int64) // size, 0, shards - 1)
    rank = np.searchsorted(inside, label) - np.searchsorted(inside, shard * size)
    return sampled, shard * per_shard + rank


def _kernel(ctx: KernelContext) -> Any:
    xp, to_host = ctx.xp, ctx.backend.to_host
    rng = ctx.rng(ctx.attrs.get("seed"))
    classes = ctx.inputs[0].shape[0]
    num_sample, shards = int(ctx.attrs["num_sample"]), int(ctx.attrs.get("parallel_num", 1))
    mapped_out, sampled_out, weight_out = ctx.out(0), ctx.out(1), ctx.out(2)
    uniform = ctx.workspace((classes,), np.float64)

    def run(weight: Any, label: Any) -> tuple[Any, Any, Any]:
        # a key in [0, C / shards) per class from the backend's uniform draws (the stream every backend gives)
        rng.random(out=uniform, dtype=np.float64)
        keys = np.floor(to_host(uniform) * (classes // shards)).astype(np.int64)
        sampled, mapped = sample_classes(keys, to_host(label), num_sample, shards)
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
    attr_names=("num_sample", "seed", "parallel_num"),
    doc="sample num_sample classes (every labelled one first, then random negatives), their weight rows, and "
        "each label's index among them", amp="black")

OPS = (DISTRIBUTED_PARTIAL_FC_SAMPLE,)
