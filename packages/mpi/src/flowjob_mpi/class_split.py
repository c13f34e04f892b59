"""Sparse softmax cross entropy over a class axis split over the ranks (legacy's model-parallel classifier head):
the piece of the signature ``(labels B, logits S(last)) -> (loss B, prob S(last))`` that flowjob-ops' rule names
(``flowjob_ops.layout_rules.per_label``).

Each rank holds the logits of classes ``[shard_start, shard_stop)``. The row maxima are all-reduced (``MPI_MAX``),
then the sums of ``exp(x - max)`` (``MPI_SUM``): each rank's probabilities are its classes' share of the whole
softmax. The rank holding a row's label contributes ``max + log(sum) - x[label]`` to that row's loss, the others
0, and one more sum gives every rank the whole loss. A label outside ``[0, classes)`` adds no loss, as in one
process. Its gradient needs no collective (``flowjob_ops``'s ``sharded_sparse_softmax_cross_entropy_grad``).
On GPU ranks whose world chose NCCL the three reductions run on the device (``flowjob_mpi.nccl_boxing``).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, ShapeError

from flowjob_mpi import nccl_boxing
from flowjob_mpi.faults import WAITING
from flowjob_mpi.ops import _nccl_for
from flowjob_mpi.world import world


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits = inputs
    if labels.dtype.kind not in "iu" or logits.dtype.kind != "f":
        raise ShapeError(f"labels must be integers and logits floating, got {labels.dtype} and {logits.dtype}")
    if not logits.shape or labels.shape != logits.shape[:-1]:
        raise ShapeError(f"labels {labels.shape} must be the logits' shape {logits.shape} without the class axis")
    start, stop = attrs.get("shard_start"), attrs.get("shard_stop")
    if not isinstance(start, int) or not isinstance(stop, int) or stop - start != logits.shape[-1]:
        raise ShapeError(f"shard_start {start!r} and shard_stop {stop!r} must hold the {logits.shape[-1]} classes of "
                         f"the piece")
    return [BlobSpec(labels.shape, logits.dtype), logits]


def _kernel(ctx: KernelContext) -> Callable[[Any, Any], tuple[Any, Any]]:
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: on the device through NCCL
        return nccl_boxing.class_split_softmax_kernel(ctx, nccl)
    from mpi4py import MPI

    comm = world().comm
    start, stop = ctx.attrs["shard_start"], ctx.attrs["shard_stop"]
    classes = ctx.inputs[1].shape[-1]
    rows = int(np.prod(ctx.inputs[0].shape, dtype=np.int64))
    dtype = ctx.inputs[1].dtype
    loss_out, prob_out = ctx.out(0), ctx.out(1)
    host, device, host_arrays = ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays
    index = np.arange(rows)
    what = f"the class-split softmax of node {ctx.node_name!r}"

    def run(labels: Any, logits: Any) -> tuple[Any, Any]:
        x = np.asarray(host(logits), dtype=dtype).reshape(rows, classes)
        label = np.asarray(host(labels)).reshape(rows)
        peak = x.max(axis=1)
        WAITING.enter(what)
        comm.Allreduce(MPI.IN_PLACE, peak, op=MPI.MAX)
        shifted = x - peak[:, None]
        prob = np.exp(shifted)
        total = prob.sum(axis=1)
        comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
        prob /= total[:, None]
        held = (label >= start) & (label < stop)
        picked = shifted[index, np.where(held, label - start, 0)]
        loss = np.where(held, np.log(total) - picked, 0).astype(dtype)
        comm.Allreduce(MPI.IN_PLACE, loss, op=MPI.SUM)
        WAITING.leave()
        if host_arrays:
            np.copyto(loss_out, loss.reshape(loss_out.shape))
            np.copyto(prob_out, prob.reshape(prob_out.shape))
        else:
            loss_out[...] = device(loss.reshape(loss_out.shape))
            prob_out[...] = device(np.ascontiguousarray(prob.reshape(prob_out.shape)))
        return loss_out, prob_out

    return run


SPARSE_SOFTMAX_CROSS_ENTROPY_CLASS_SPLIT = OpDef(
    "mpi_sparse_softmax_cross_entropy_class_split", _infer, kernel=_kernel, not_differentiable=True,
    doc="inputs (labels, this rank's logits of classes [shard_start, shard_stop)): the whole per-row loss and this "
        "rank's classes' probabilities", effects=Effects(ordered=True))
