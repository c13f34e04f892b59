"""Softmax and log-softmax along an axis split over the ranks (a class axis too large for one rank), and their
gradients: the pieces of the signature ``S(axis) -> S(axis)`` that flowjob-ops' rules name
(``flowjob_ops.layout_rules.softmax`` and its siblings).

Each rank holds a slice of every row along ``axis``. A row's maximum is all-reduced (``MPI_MAX``), then its sum of
``exp(x - max)`` (``MPI_SUM``), so each rank's piece is its share of the whole row's softmax. The gradients need one
sum along the row each: ``sum(dy * y)`` for the softmax, ``sum(dy)`` for the log-softmax, all-reduced the same way.
The softmax cross entropy with probability labels (``softmax_cross_entropy``) takes its row maxima and sums the same
way and outputs this rank's classes' share of each row's loss (partial sums); its gradient needs no collective.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, ShapeError

from flowjob_mpi.faults import WAITING
from flowjob_mpi.world import world


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if any(x.dtype.kind != "f" or x.shape != inputs[0].shape for x in inputs):
        raise ShapeError(f"inputs must be floating and shaped alike, got {[str(x) for x in inputs]}")
    axis = attrs.get("axis", -1)
    rank = len(inputs[0].shape)
    if not -rank <= (-1 if axis is None else axis) < rank:
        raise ShapeError(f"axis {axis} is out of range for shape {inputs[0].shape}")
    return [inputs[-1]]


def _row_collective(ctx: KernelContext, what: str) -> tuple[int, Callable[[np.ndarray, Any], np.ndarray]]:
    """The normalized axis and ``reduce(values, op)``: ``values`` (the row reductions of this rank's piece, kept
    dims) combined over the ranks in place."""
    comm = world().comm
    axis = ctx.attrs.get("axis", -1)
    axis = (-1 if axis is None else axis) % len(ctx.inputs[0].shape)
    label = f"the {what} of node {ctx.node_name!r}"

    def reduce(values: np.ndarray, op: Any) -> np.ndarray:
        values = np.ascontiguousarray(values)
        WAITING.enter(label)
        comm.Allreduce(_in_place(), values, op=op)
        WAITING.leave()
        return values

    return axis, reduce


def _in_place() -> Any:
    from mpi4py import MPI

    return MPI.IN_PLACE


def _ops() -> Any:
    from mpi4py import MPI

    return MPI


def _kernel(ctx: KernelContext, compute: Callable[..., np.ndarray], what: str) -> Callable[..., Any]:
    axis, reduce = _row_collective(ctx, what)
    mpi = _ops()
    out, host, device, host_arrays = ctx.out(0), ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays

    def run(*values: Any) -> Any:
        result = compute(axis, reduce, mpi, *(np.asarray(host(v)) for v in values))
        if host_arrays:
            np.copyto(out, result)
        else:
            out[...] = device(np.ascontiguousarray(result))
        return out

    return run


def _softmax(axis: int, reduce: Any, mpi: Any, x: np.ndarray, log: bool = False) -> np.ndarray:
    shifted = x - reduce(x.max(axis=axis, keepdims=True), mpi.MAX)
    exp = np.exp(shifted)
    total = reduce(exp.sum(axis=axis, keepdims=True), mpi.SUM)
    return shifted - np.log(total) if log else exp / total


def _softmax_grad(axis: int, reduce: Any, mpi: Any, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return y * (dy - reduce((dy * y).sum(axis=axis, keepdims=True), mpi.SUM))  # y * (dy - sum(dy * y))


def _log_softmax_grad(axis: int, reduce: Any, mpi: Any, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy - np.exp(y) * reduce(dy.sum(axis=axis, keepdims=True), mpi.SUM)  # dy - exp(y) * sum(dy)


def _cross_entropy_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits = inputs
    if labels.shape != logits.shape or not logits.shape or logits.dtype.kind != "f":
        raise ShapeError(f"labels and logits must be floating and of one shape, got {labels} and {logits}")
    return [BlobSpec(logits.shape[:-1], logits.dtype), logits]


def _cross_entropy_kernel(ctx: KernelContext) -> Callable[[Any, Any], tuple[Any, Any]]:
    _, reduce = _row_collective(ctx, "class-split softmax cross entropy")
    mpi = _ops()
    loss_out, prob_out = ctx.out(0), ctx.out(1)
    host, device, host_arrays = ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays

    def run(labels: Any, logits: Any) -> tuple[Any, Any]:
        log_prob = _softmax(-1, reduce, mpi, np.asarray(host(logits)), log=True)
        share = -(np.asarray(host(labels)) * log_prob).sum(axis=-1)  # this rank's classes' part of each row's loss
        for out, value in ((loss_out, share), (prob_out, np.exp(log_prob))):
            if host_arrays:
                np.copyto(out, value.reshape(out.shape), casting="unsafe")
            else:
                out[...] = device(np.ascontiguousarray(value.reshape(out.shape).astype(out.dtype)))
        return loss_out, prob_out

    return run


SOFTMAX_CROSS_ENTROPY_CLASS_SPLIT = OpDef(
    "mpi_softmax_cross_entropy_class_split", _cross_entropy_infer, kernel=_cross_entropy_kernel,
    not_differentiable=True,
    doc="inputs (this rank's classes of labels and logits): this rank's classes' share of each row's loss (partial "
        "sums over the ranks) and its classes' probabilities", effects=Effects(ordered=True))


def _record(name: str, compute: Callable[..., np.ndarray], doc: str) -> OpDef:
    return OpDef(name, _infer, kernel=lambda ctx: _kernel(ctx, compute, name.removeprefix("mpi_")),
                 not_differentiable=True, doc=doc, effects=Effects(ordered=True))


SOFTMAX_CLASS_SPLIT = _record("mpi_softmax_class_split", _softmax,
                              "this rank's piece of the softmax along axis, whose slices the ranks hold")
LOG_SOFTMAX_CLASS_SPLIT = _record("mpi_log_softmax_class_split", lambda *a: _softmax(*a, log=True),
                                  "this rank's piece of the log-softmax along axis, whose slices the ranks hold")
SOFTMAX_GRAD_CLASS_SPLIT = _record("mpi_softmax_grad_class_split", _softmax_grad,
                                   "inputs (y, dy) of a softmax along a split axis: this rank's piece of d x")
LOG_SOFTMAX_GRAD_CLASS_SPLIT = _record("mpi_log_softmax_grad_class_split", _log_softmax_grad,
                                       "inputs (y, dy) of a log-softmax along a split axis: this rank's piece of d x")

OPS = (SOFTMAX_CLASS_SPLIT, LOG_SOFTMAX_CLASS_SPLIT, SOFTMAX_GRAD_CLASS_SPLIT, LOG_SOFTMAX_GRAD_CLASS_SPLIT,
       SOFTMAX_CROSS_ENTROPY_CLASS_SPLIT)
