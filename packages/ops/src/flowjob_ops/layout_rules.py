"""The layout signatures of the ops a model-parallel program needs (``Compute.layouts``, ``flowjob_core.ir.layout``).

Each rule takes the logical input specs and the attributes and lists signatures, best first; running whole (every
input broadcast) is always allowed besides. ``S(k)``: split on axis k, ``B``: broadcast, ``P``: partial sums.
"""
from __future__ import annotations

from typing import Sequence

from flowjob_core import BlobSpec
from flowjob_core.ir.layout import BROADCAST, PARTIAL_SUM, LayoutRule, Signature, elementwise_signatures, split

from flowjob_ops.records.common import normalize_axes, normalize_axis

B, P = BROADCAST, PARTIAL_SUM


def matmul(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Each batch axis of the product split on both operands' matching axes (broadcast where an operand lacks it or
    has it of size 1): independent products. Then the matrices' rules on the last two axes: rows of a split with b
    broadcast (rows of the product), columns of b split with a broadcast (its columns), both split on the
    contracted axis (partial products); a partial sum times a broadcast value stays a partial sum (the product is
    linear in each operand)."""
    a, b = inputs
    if len(a.shape) < 2 or len(b.shape) < 2:
        return []
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    ra, rb = len(a.shape), len(b.shape)
    ro = max(ra, rb)
    found = []
    for k in range(ro - 2):  # numpy's broadcasting aligns the batch axes from the matrices back
        ka, kb = k - (ro - ra), k - (ro - rb)
        size = max(a.shape[ka] if ka >= 0 else 1, b.shape[kb] if kb >= 0 else 1)
        if size == 1:
            continue
        layouts = tuple(split(j) if j >= 0 and x.shape[j] == size else B for j, x in ((ka, a), (kb, b)))
        found.append(Signature(layouts, (split(k),)))
    rows, a_inner = (ra - 1, ra - 2) if ta else (ra - 2, ra - 1)
    b_inner, cols = (rb - 1, rb - 2) if tb else (rb - 2, rb - 1)
    return found + [Signature((split(rows), B), (split(ro - 2),)), Signature((B, split(cols)), (split(ro - 1),)),
                    Signature((split(a_inner), split(b_inner)), (P,)),
                    Signature((P, B), (P,)), Signature((B, P), (P,))]


def same_shape_elementwise(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Ops computing each element from the same element of equally shaped inputs (relu_grad, ...)."""
    return elementwise_signatures(inputs, inputs[0])


def along_other_axes(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Ops normalizing along ``axis`` (every input shaped alike): split along any other axis, each slice is
    normalized whole."""
    x = inputs[0]
    axis = normalize_axis(attrs.get("axis", -1), len(x.shape))
    return [Signature((split(k),) * len(inputs), (split(k),)) for k in range(len(x.shape)) if k != axis]


def _normalized_along(local_op: str) -> LayoutRule:
    def rule(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
        axis = normalize_axis(attrs.get("axis", -1), len(inputs[0].shape))
        return along_other_axes(inputs, attrs) + [
            Signature((split(axis),) * len(inputs), (split(axis),), local_op=local_op)]

    rule.__doc__ = (f"Split along any axis but the normalized one (each slice normalized whole); or along the "
                    f"normalized axis itself, through flowjob-mpi's ``{local_op}`` (the reductions along it summed, "
                    f"or maximized, over the ranks).")
    return rule


softmax = _normalized_along("mpi_softmax_class_split")
softmax_grad = _normalized_along("mpi_softmax_grad_class_split")
log_softmax = _normalized_along("mpi_log_softmax_class_split")
log_softmax_grad = _normalized_along("mpi_log_softmax_grad_class_split")


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
    """A split axis that is not reduced stays split; a split axis averaged away gives partial sums through
    ``sharded_reduce_mean`` (each rank's sum over the whole count); partial sums stay so (the mean is linear)."""
    (x,) = inputs
    axes, keep = normalize_axes(attrs.get("axis"), len(x.shape)), bool(attrs.get("keepdims", False))
    found = [Signature((split(k),), (split(_reduced_axis(k, axes, keep)),))
             for k in range(len(x.shape)) if k not in axes]
    found += [Signature((split(k),), (P,), local_op="sharded_reduce_mean") for k in axes]
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


def _channel_axis(rank: int, attrs: dict) -> int:
    """The channel axis of a convolution's input and output: 1 channels first (NCHW, the default), else the last."""
    fmt = str(attrs.get("data_format") or "NC").upper()
    return 1 if fmt.startswith("NC") or fmt == "CHANNELS_FIRST" else rank - 1


def conv(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """A convolution (x, weight): the batch split with the weight broadcast (data parallel); the weight split by
    output channels (its axis 0) with x broadcast, giving the output split on its channel axis; x split by channels
    with the weight by input channels (its axis 1), giving partial sums (these two with one group only: with groups,
    a rank's filters would read other ranks' channels); partial sums of either operand stay partial (it is linear
    in each)."""
    x, w = inputs
    found = [Signature((split(0), B), (split(0),))]
    if attrs.get("groups", 1) == 1:
        channels = _channel_axis(len(x.shape), attrs)
        found += [Signature((B, split(0)), (split(channels),)),
                  Signature((split(channels), split(1)), (P,))]  # input channels split: partial sums, as matmul
    return found + [Signature((P, B), (P,)), Signature((B, P), (P,))]


def conv_grad_data(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """d x of a convolution (dy, weight): the batch split alike; dy split by channels with the weight by output
    channels gives partial sums (each rank's filters' share of d x); the weight split by input channels gives d x
    split by channels."""
    dy, w = inputs
    x_shape = (("x_shape", 0),)
    found = [Signature((split(0), B), (split(0),), shape_attrs=x_shape)]
    if attrs.get("groups", 1) == 1:
        channels = _channel_axis(len(dy.shape), attrs)
        found += [Signature((split(channels), split(0)), (P,)),
                  Signature((B, split(1)), (split(channels),), shape_attrs=x_shape)]
    return found + [Signature((P, B), (P,)), Signature((B, P), (P,))]


def conv_grad_filter(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """d weight of a convolution (x, dy): the batch split on both gives partial sums; dy split by channels with x
    broadcast gives the weight's gradient split by output channels, x split by channels with dy broadcast gives it
    split by input channels."""
    x, dy = inputs
    found = [Signature((split(0), split(0)), (P,))]
    if attrs.get("groups", 1) == 1:
        channels = _channel_axis(len(x.shape), attrs)
        found += [Signature((B, split(channels)), (split(0),), shape_attrs=(("w_shape", 0),)),
                  Signature((split(channels), B), (split(1),), shape_attrs=(("w_shape", 0),))]
    return found + [Signature((P, B), (P,)), Signature((B, P), (P,))]


def moments(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Mean and variance over ``axes`` (a layer norm's statistics): an axis they are not taken over stays split on
    both outputs (each rank's rows have all their entries)."""
    (x,) = inputs
    axes, keep = normalize_axes(attrs.get("axes"), len(x.shape)), bool(attrs.get("keepdims", False))
    return [Signature((split(k),), (split(_reduced_axis(k, axes, keep)),) * 2)
            for k in range(len(x.shape)) if k not in axes]


def moments_grad(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """(x, mean, d mean and/or d variance) -> d x: split alike along an axis the statistics keep."""
    x = inputs[0]
    axes, keep = normalize_axes(attrs.get("axes"), len(x.shape)), bool(attrs.get("keepdims", False))
    return [Signature((split(k),) + (split(_reduced_axis(k, axes, keep)),) * (len(inputs) - 1), (split(k),))
            for k in range(len(x.shape)) if k not in axes]


def batch_norm(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """(x, mean, variance[, scale][, offset]), each parameter of x's rank broadcasting to it (a layer norm's
    statistics, its gamma and beta): split along any axis of x, a parameter split alike where it spans that axis
    and broadcast where it has it of size 1."""
    return elementwise_signatures(inputs, inputs[0])


def batch_norm_grad(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """(x, mean, variance[, scale], dy) -> (dx, d mean, d variance[, d scale]): split along an axis of x, each
    parameter's gradient split alike where the parameter spans that axis, else partial sums (each rank sums its
    rows into it)."""
    x, params = inputs[0], inputs[1:-1]
    found = []
    for k, size in enumerate(x.shape):
        if size == 1:
            continue
        spans = [p.shape[k] == size for p in params]
        layouts = tuple(split(k) if s else B for s in spans)
        found.append(Signature((split(k), *layouts, split(k)), (split(k), *(split(k) if s else P for s in spans))))
    return found


def transpose(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Axes permuted by ``perm`` (default reversed): a split moves with its axis (output axis j is input axis
    perm[j]); partial sums stay so."""
    (x,) = inputs
    rank = len(x.shape)
    perm = attrs.get("perm")
    order = tuple(reversed(range(rank))) if perm is None else tuple(normalize_axis(p, rank) for p in perm)
    return [Signature((split(order[j]),), (split(j),)) for j in range(rank)] + [Signature((P,), (P,))]


def _batch_norm_train_layouts(x: BlobSpec, attrs: dict, channels_in: Sequence[bool], outputs: int,
                              local_op: str) -> list[Signature]:
    """Shared by the forward and the gradient: ``channels_in`` says which inputs are per channel (the others are
    x-shaped); every output but the first (x-shaped) is per channel."""
    axis = normalize_axis(attrs.get("axis"), len(x.shape))
    found = []
    for k, size in enumerate(x.shape):
        if k == axis or size == 1:
            continue
        found.append(Signature(tuple(B if c else split(k) for c in channels_in), (split(k),) + (B,) * (outputs - 1),
                               local_op=local_op))
    found.append(Signature(tuple(split(0) if c else split(axis) for c in channels_in),
                           (split(axis),) + (split(0),) * (outputs - 1)))  # each rank's channels: no collective
    return found


def batch_norm_train(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Train-mode batch normalization (x[, gamma][, beta]) -> (y, mean, variance): the batch (or another axis
    the statistics run over) split, through flowjob-mpi's ``mpi_batch_norm_train_rows_split``, whose statistics
    are the sums of every rank's rows all-reduced (the whole batch's, as one process computes them); or the
    channel axis split with gamma and beta, each rank normalizing its channels."""
    return _batch_norm_train_layouts(inputs[0], attrs, [False] + [True] * (len(inputs) - 1), 3,
                                     "mpi_batch_norm_train_rows_split")


def batch_norm_train_grad(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """(x, mean, variance[, gamma][, y], dy) -> (dx[, dgamma][, dbeta]): as the forward; split rows need the
    sums of dy and dy * xhat over every rank's rows (``mpi_batch_norm_train_grad_rows_split``)."""
    params = 3 + bool(attrs.get("with_scale"))
    outputs = 1 + bool(attrs.get("with_scale")) + bool(attrs.get("with_offset"))
    channels_in = [False] + [True] * (params - 1) + [False] * (len(inputs) - params)
    return _batch_norm_train_layouts(inputs[0], attrs, channels_in, outputs, "mpi_batch_norm_train_grad_rows_split")


def dense_per_row(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Softmax cross entropy with probability labels, (labels, logits) -> (loss, prob), and its gradient,
    (labels, prob, dy) -> d logits: the rows (the axes before the class axis) split alike; or the class axis split,
    the forward through flowjob-mpi's ``mpi_softmax_cross_entropy_class_split`` (each row's max and sum of exp
    all-reduced; each rank's loss is its classes' share, partial sums), the gradient as it is (``prob - labels``
    of this rank's classes, times the row's dy)."""
    logits = inputs[1]
    classes = len(logits.shape) - 1
    forward = len(inputs) == 2
    found = []
    for k in range(classes):
        found.append(Signature((split(k),) * len(inputs), (split(k),) * (2 if forward else 1)))
    if forward:
        found.append(Signature((split(classes),) * 2, (P, split(classes)),
                               local_op="mpi_softmax_cross_entropy_class_split"))
    else:
        found.append(Signature((split(classes), split(classes), B), (split(classes),)))
    return found


def l2_normalize(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """``l2_normalize`` (x -> y, square_x_sum kept dims) and its gradient (dy, y, square_x_sum -> dx): split along any
    axis but the normalized one (a class layer split by classes, normalized along its features)."""
    x = inputs[-1] if len(inputs) == 1 else inputs[1]
    axis = normalize_axis(attrs.get("axis", -1), len(x.shape))
    outputs = 2 if len(inputs) == 1 else 1
    return [Signature((split(k),) * len(inputs), (split(k),) * outputs) for k in range(len(x.shape))
            if k != axis and x.shape[k] != 1]


def pool(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Pooling and its gradients (each window within one sample and channel): the batch or the channel axis split
    alike on every input and the output (an average's gradient, which holds ``x_shape``, gets its piece's)."""
    rank = len(inputs[0].shape)
    pieces = (("x_shape", 0),) if "x_shape" in attrs else ()
    return [Signature((split(k),) * len(inputs), (split(k),), shape_attrs=pieces)
            for k in dict.fromkeys((0, _channel_axis(rank, attrs)))]


def concat(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Inputs joined along ``axis``: split alike along another axis (each rank joins its rows); partial sums join
    to partial sums."""
    first = inputs[0].shape
    axis = normalize_axis(attrs.get("axis", 0), len(first))
    found = [Signature((split(k),) * len(inputs), (split(k),)) for k in range(len(first))
             if k != axis and first[k] != 1]
    return found + [Signature((P,) * len(inputs), (P,))]


def split_pieces(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """``split`` (concat's gradient), the input cut along ``axis`` into ``sizes``: split along another axis, every
    piece split alike; partial sums cut into partial sums."""
    (x,) = inputs
    axis, pieces = normalize_axis(attrs.get("axis", 0), len(x.shape)), len(attrs.get("sizes") or ())
    found = [Signature((split(k),), (split(k),) * pieces) for k in range(len(x.shape)) if k != axis and x.shape[k] != 1]
    return found + [Signature((P,), (P,) * pieces)]


def _whole_axes(attrs: dict, rank: int) -> list[int]:
    """The axes a legacy ``slice`` (per axis a begin and a size) takes whole: begin None or 0, size None or -1."""
    begin, size = attrs.get("begin"), attrs.get("size")
    if (begin is not None and len(begin) != rank) or (size is not None and len(size) != rank):
        return []
    return [k for k in range(rank)
            if (begin is None or begin[k] in (None, 0)) and (size is None or size[k] in (None, -1))]


def slice_box(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """``slice`` and ``slice_grad`` (begin and size per axis): split along an axis the box takes whole (the
    gradient's ``shape`` then its piece's); partial sums stay so (both are linear)."""
    (x,) = inputs
    grad = "shape" in attrs
    rank = len(tuple(attrs["shape"])) if grad else len(x.shape)
    pieces = (("shape", 0),) if grad else ()
    found = [Signature((split(k),), (split(k),), shape_attrs=pieces) for k in _whole_axes(attrs, rank)
             if x.shape[k] != 1]
    return found + [Signature((P,), (P,))]
