"""The layout signatures of the ops a model-parallel program needs (``Compute.layouts``, ``flowjob_core.ir.layout``).

Each rule takes the logical input specs and the attributes and lists signatures, best first; running whole (every
input broadcast) is always allowed besides. ``S(k)``: split on axis k, ``B``: broadcast, ``P``: partial sums.
"""
from __future__ import annotations

from typing import Sequence

from flowjob_core import BlobSpec
from flowjob_core.ir.layout import BROADCAST, PARTIAL_SUM, Signature, elementwise_signatures, split

from flowjob_ops.records.common import normalize_axes, normalize_axis

B, P = BROADCAST, PARTIAL_SUM


def matmul(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Plain matrices: rows of a split with b broadcast (rows of the product), columns of b split with a broadcast
    (its columns), both split on the contracted axis (partial products); a partial sum times a broadcast value
    stays a partial sum (the product is linear in each operand)."""
    a, b = inputs
    if len(a.shape) != 2 or len(b.shape) != 2:
        return []
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    rows, a_inner = (1, 0) if ta else (0, 1)
    b_inner, cols = (1, 0) if tb else (0, 1)
    return [Signature((split(rows), B), (split(0),)), Signature((B, split(cols)), (split(1),)),
            Signature((split(a_inner), split(b_inner)), (P,)),
            Signature((P, B), (P,)), Signature((B, P), (P,))]


def same_shape_elementwise(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Ops computing each element from the same element of equally shaped inputs (relu_grad, ...)."""
    return elementwise_signatures(inputs, inputs[0])


def along_other_axes(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Ops normalizing along ``axis`` (softmax, log_softmax and their gradients, every input shaped alike): split
    along any other axis, each slice is normalized whole."""
    x = inputs[0]
    axis = normalize_axis(attrs.get("axis", -1), len(x.shape))
    return [Signature((split(k),) * len(inputs), (split(k),)) for k in range(len(x.shape)) if k != axis]


def per_label(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Losses over a class axis (sparse softmax cross entropy and its gradient): the labels' axes, which lead
    every input and output, split alike (each rank's rows see all their classes); or the class axis split, the
    labels and the loss whole on every rank."""
    labels = inputs[0]
    outputs = 2 if len(inputs) == 2 else 1  # the forward gives (loss, prob), the gradient d logits
    found = [Signature((split(k),) * len(inputs), (split(k),) * outputs) for k in range(len(labels.shape))]
    classes = split(len(labels.shape))  # the class axis split: a model-parallel classifier head
    if outputs == 2:  # its max and sum are reduced over the ranks: flowjob-mpi's piece, there where ranks are
        found.append(Signature((B, classes), (B, classes), local_op="mpi_sparse_softmax_cross_entropy_class_split"))
    else:
        found.append(Signature((B, classes, B), (classes,), local_op="sharded_sparse_softmax_cross_entropy_grad"))
    return found


def _reduced_axis(axis: int, axes: tuple[int, ...], keepdims: bool) -> int:
    return axis if keepdims else axis - sum(1 for a in axes if a < axis)


def reduce_sum(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """A split axis summed away gives partial sums; another split axis stays split; partial sums stay so."""
    (x,) = inputs
    axes, keep = normalize_axes(attrs.get("axis"), len(x.shape)), bool(attrs.get("keepdims", False))
    found = [Signature((split(k),), (P if k in axes else split(_reduced_axis(k, axes, keep)),))
             for k in range(len(x.shape))]
    return found + [Signature((P,), (P,))]


def reduce_mean(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """A split axis that is not reduced stays split; partial sums stay so (the mean is linear)."""
    (x,) = inputs
    axes, keep = normalize_axes(attrs.get("axis"), len(x.shape)), bool(attrs.get("keepdims", False))
    found = [Signature((split(k),), (split(_reduced_axis(k, axes, keep)),))
             for k in range(len(x.shape)) if k not in axes]
    return found + [Signature((P,), (P,))]


def linear_unary(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """An op linear in its one input whose shape it may change (reshape, identity): partial sums stay so."""
    return [Signature((P,), (P,))]


def gather(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """From a table split along the gathered axis: each rank gathers the rows it holds and zeros for the others
    (``sharded_gather``), partial sums. Split along another axis: the rows are split alike. Indices split: the
    gathered rows are split along the matching axis."""
    params, indices = inputs
    axis = normalize_axis(attrs.get("axis", 0), len(params.shape))
    found = [Signature((split(axis), B), (P,), local_op="sharded_gather")]
    for k in range(len(params.shape)):
        if k != axis:
            found.append(Signature((split(k), B), (split(k if k < axis else k + len(indices.shape) - 1),)))
    found += [Signature((B, split(j)), (split(axis + j),)) for j in range(len(indices.shape))]
    return found


def gather_grad(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """The gradient of a row-split table: each rank sums into the rows it holds (``sharded_gather_grad``);
    partial sums of dy give partial sums of the table's gradient."""
    shape = tuple(attrs["shape"])
    axis = normalize_axis(attrs.get("axis", 0), len(shape))
    return [Signature((B, B), (split(axis),), local_op="sharded_gather_grad"), Signature((B, P), (P,))]
