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

Over MPI ranks, with the weight split by classes (``distribute=flow.distribute.split(0)``) and ``parallel_num``
equal to the rank count, each rank samples its own shard (``sharded_distributed_partial_fc_sample``): its
``sampled_label`` and ``sampled_weight`` are its block of the whole op's (split by rows), ``mapped_label`` is whole
on every rank. The weight's gradient (``distributed_partial_fc_sample_grad``) then lands in each rank's own classes.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir.layout import BROADCAST, Signature, split


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
    return [ctx.apply("distributed_partial_fc_sample_grad", [weight_grad, ctx.outputs[1], ctx.inputs[0]],
                      {"parallel_num": ctx.attrs.get("parallel_num", 1)}), None]


def _layouts(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """The weight split by classes into the op's ``parallel_num`` shards: each rank samples its own."""
    if attrs.get("parallel_num", 1) < 2:
        return []
    return [Signature((split(0), BROADCAST), (BROADCAST, split(0), split(0)),
                      local_op="sharded_distributed_partial_fc_sample")]


def _shard(op: str, attrs: dict, rows: int, shards: int) -> int:
    """This rank's shard among ``parallel_num``: its piece ``[shard_start, shard_stop)`` must be one of them."""
    start, stop, whole = attrs.get("shard_start"), attrs.get("shard_stop"), attrs.get("shard_size")
    if not all(isinstance(v, int) for v in (start, stop, whole)) or stop - start != rows or whole != rows * shards \
            or start % rows:
        raise ShapeError(f"{op}: the piece [{start!r}, {stop!r}) of {whole!r} rows is not one of its parallel_num "
                         f"{shards} shards: split the weight over as many ranks as the placement's devices")
    return start // rows


def _sharded_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "sharded_distributed_partial_fc_sample"
    weight, label = inputs
    shards = attrs.get("parallel_num", 1)
    _shard(op, attrs, weight.shape[0] if weight.shape else 0, shards)
    whole = _infer([BlobSpec((attrs["shard_size"],) + tuple(weight.shape[1:]), weight.dtype), label], attrs)
    per_shard = int(attrs["num_sample"]) // shards
    return [whole[0], BlobSpec((per_shard,), label.dtype), BlobSpec((per_shard,) + tuple(weight.shape[1:]),
                                                                     weight.dtype)]


def _sharded_kernel(ctx: KernelContext) -> Any:
    xp, to_host = ctx.xp, ctx.backend.to_host
    rng = ctx.rng(ctx.attrs.get("seed"))
    classes, shards = int(ctx.attrs["shard_size"]), int(ctx.attrs["parallel_num"])
    num_sample, start = int(ctx.attrs["num_sample"]), int(ctx.attrs["shard_start"])
    shard = _shard("sharded_distributed_partial_fc_sample", ctx.attrs, ctx.inputs[0].shape[0], shards)
    per_shard = num_sample // shards
    mapped_out, sampled_out, weight_out = ctx.out(0), ctx.out(1), ctx.out(2)
    uniform = ctx.workspace((classes,), np.float64)
    local = ctx.workspace((per_shard,), np.int64)

    def run(weight: Any, label: Any) -> tuple[Any, Any, Any]:
        rng.random(out=uniform, dtype=np.float64)  # the whole op's draws: one key per class of every shard
        keys = np.floor(to_host(uniform) * (classes // shards)).astype(np.int64)
        sampled, mapped = sample_classes(keys, to_host(label), num_sample, shards)
        mine = sampled[shard * per_shard:(shard + 1) * per_shard]
        sampled_out[...] = xp.asarray(mine)
        mapped_out[...] = xp.asarray(mapped)
        local[...] = xp.asarray(mine - start)
        xp.take(weight, local, axis=0, out=weight_out)
        return mapped_out, sampled_out, weight_out

    return run


def _grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    data, sampled, weight = inputs
    if sampled.shape[:1] != data.shape[:1] or data.shape[1:] != weight.shape[1:]:
        raise ShapeError(f"distributed_partial_fc_sample_grad: {data.shape} rows of the sampled weight's gradient for "
                         f"{sampled.shape} sampled classes of a weight {weight.shape}")
    return [weight]


def _grad_kernel(ctx: KernelContext) -> Any:
    return _scatter_kernel(ctx, 0)


def _scatter_kernel(ctx: KernelContext, start: int) -> Any:
    """The sampled rows' gradient summed into the weight's rows, the first of which is class ``start``."""
    xp, out = ctx.xp, ctx.out(0)

    def run(data: Any, sampled: Any, weight: Any) -> Any:
        out.fill(0)
        xp.add.at(out, sampled - start, data)
        return out

    return run


def _grad_layouts(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Each rank's sampled classes lie in its own shard of the weight (the sharded sample's rule)."""
    if attrs.get("parallel_num", 1) < 2:
        return []
    return [Signature((split(0), split(0), split(0)), (split(0),),
                      local_op="sharded_distributed_partial_fc_sample_grad")]


def _sharded_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    data, sampled, weight = inputs
    _shard("sharded_distributed_partial_fc_sample_grad", attrs, data.shape[0], attrs.get("parallel_num", 1))
    return _grad_infer(inputs, attrs)


def _sharded_grad_kernel(ctx: KernelContext) -> Any:
    # shard_start is the piece of the sampled rows; this rank's weight rows begin at its shard's first class
    rows = ctx.attrs["shard_stop"] - ctx.attrs["shard_start"]
    shard = ctx.attrs["shard_start"] // rows
    return _scatter_kernel(ctx, shard * ctx.inputs[2].shape[0])


DISTRIBUTED_PARTIAL_FC_SAMPLE = OpDef(
    "distributed_partial_fc_sample", _infer, kernel=_kernel, grad=_grad,
    doc="sample num_sample classes (every labelled one first, then random negatives), their weight rows, and "
        "each label's index among them", compute=Compute(layouts=_layouts, amp="black"),
    legacy=LegacyFace(output_names=("mapped_label", "sampled_label", "sampled_weight"), input_names=("weight", "label"),
                      attr_names=("num_sample", "seed", "parallel_num")))
SHARDED_DISTRIBUTED_PARTIAL_FC_SAMPLE = OpDef(
    "sharded_distributed_partial_fc_sample", _sharded_infer, kernel=_sharded_kernel, not_differentiable=True,
    doc="inputs (this rank's shard [shard_start, shard_stop) of the class weights, labels): its block of the whole "
        "op's samples, and every mapped label", compute=Compute(amp="black"))
DISTRIBUTED_PARTIAL_FC_SAMPLE_GRAD = OpDef(
    "distributed_partial_fc_sample_grad", _grad_infer, kernel=_grad_kernel, not_differentiable=True,
    doc="inputs (the sampled weight's gradient, the sampled classes, the weight): the weight's gradient",
    compute=Compute(layouts=_grad_layouts))
SHARDED_DISTRIBUTED_PARTIAL_FC_SAMPLE_GRAD = OpDef(
    "sharded_distributed_partial_fc_sample_grad", _sharded_grad_infer, kernel=_sharded_grad_kernel,
    not_differentiable=True,
    doc="inputs (this rank's rows of the sampled weight's gradient and classes, its shard of the weight): that "
        "shard's gradient")

OPS = (DISTRIBUTED_PARTIAL_FC_SAMPLE, SHARDED_DISTRIBUTED_PARTIAL_FC_SAMPLE, DISTRIBUTED_PARTIAL_FC_SAMPLE_GRAD,
       SHARDED_DISTRIBUTED_PARTIAL_FC_SAMPLE_GRAD)
