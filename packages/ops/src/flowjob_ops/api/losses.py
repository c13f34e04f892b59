"""Losses: ``flow.nn``'s cross entropies and legacy v0.4's lazy losses (L1Loss, MSELoss, BCELoss,
BCEWithLogitsLoss, MarginRankingLoss, TripletMarginLoss, KLDivLoss), and the top-level ``flow.smooth_l1_loss``,
``flow.combined_margin_loss`` and ``flow.ctc_loss``.

Legacy v0.4's lazy losses build the nodes legacy's Python built (so values and gradients are those of
the parts), under node names ``<name>_<part>``; the last node of a reduced loss is ``<name>_reduce_mean``
or ``<name>_reduce_sum``. Deliberate departures from legacy, each where legacy's code misbehaved:

- KLDivLoss (``log_target=False``) is 0 wherever ``target <= 0``; legacy tested ``rint(target + 0.5)``,
  which also kept targets <= -1.5 (giving nan), and took ``log`` of non-positive targets, whose nan
  reached a trainable target's gradient. Here ``log`` sees 1 at those places.
- TripletMarginLoss accepts ``swap=True`` (the distance to the negative is the smaller of
  anchor-negative and positive-negative); legacy refused it.
"""
from __future__ import annotations

import numbers
from typing import Any

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import (
    build_error, check_same_shape, floating_blob, number_as_blob, op_name, real_number)


NAMESPACES = {
    "flow.nn": ["BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss",
                "TripletMarginLoss", "distributed_sparse_softmax_cross_entropy_with_logits",
                "sigmoid_cross_entropy_with_logits", "softmax_cross_entropy_with_logits", "sparse_cross_entropy",
                "sparse_softmax_cross_entropy_with_logits"],
    "flow": ["combined_margin_loss", "ctc_loss", "smooth_l1_loss"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


def _one_sample(blob: Any, node: str, part: str) -> Any:
    """A rank-1 blob as one sample ``(1, ...)``: legacy's cross-entropy ops refused rank-1 logits (their
    inference checked rank >= 2) and its blobs were never 0-d, so one sample's loss is shaped (1,)."""
    return apply("reshape", [blob], {"shape": (1,) + tuple(blob.shape)}, name=f"{node}_{part}")


# cross entropy --------------------------------------------------------------------------------
def sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample -log softmax(logits)[label].

    Args:
        labels: integer class indices shaped like logits without its last axis (a trailing axis of size 1 is
            dropped); a label outside [0, classes) adds zero loss and zero gradient and is warned about
            once (legacy's split-class semantics).
        logits: a floating blob (..., classes).
        name: the op name; default ``SparseSoftmaxCrossEntropy_<n>``.

    Returns:
        The loss, shaped like labels (N,) and not reduced; (1,) for rank-1 logits (one sample).
    """
    node = op_name(name, "SparseSoftmaxCrossEntropy")
    if isinstance(labels, Blob) and isinstance(logits, Blob) and len(logits.shape) == 1 and labels.shape in ((), (1,)):
        logits = _one_sample(logits, node, "logits_row")
        if not labels.shape:
            labels = _one_sample(labels, node, "labels_row")
    elif isinstance(labels, Blob) and isinstance(logits, Blob) and len(labels.shape) == len(logits.shape) \
            and labels.shape and labels.shape[-1] == 1:
        labels = apply("reshape", [labels], {"shape": labels.shape[:-1]}, name=f"{node}_labels")
    loss, _prob = apply("sparse_softmax_cross_entropy", [labels, logits], name=node)
    return loss


def sparse_cross_entropy(labels: Blob, prediction: Blob, name: str | None = None) -> Blob:
    """Per-sample -log(prediction[label]) of probabilities (apply softmax first; the clamp at 1e-20 keeps
    a zero probability finite, as legacy's).

    Args:
        labels: integer class indices (int32 or int64) shaped like prediction without its last axis (a
            trailing axis of size 1 is dropped); one outside [0, classes) adds zero loss and zero gradient.
        prediction: class probabilities, a floating blob (..., classes).
        name: the op name; default ``SparseCrossEntropy_<n>``.

    Returns:
        The loss, shaped like labels and not reduced; (1,) for rank-1 predictions (one sample).
    """
    node = op_name(name, "SparseCrossEntropy")
    if isinstance(labels, Blob) and isinstance(prediction, Blob) and len(prediction.shape) == 1 \
            and labels.shape in ((), (1,)):
        prediction = _one_sample(prediction, node, "prediction_row")
        if not labels.shape:
            labels = _one_sample(labels, node, "labels_row")
    elif isinstance(labels, Blob) and isinstance(prediction, Blob) and len(labels.shape) == len(prediction.shape) \
            and labels.shape and labels.shape[-1] == 1:
        labels = apply("reshape", [labels], {"shape": labels.shape[:-1]}, name=f"{node}_labels")
    return apply("sparse_cross_entropy", [labels, prediction], name=node)


def softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample -sum(labels * log softmax(logits)) over the last axis.

    Args:
        labels: a probability distribution per sample, shaped like logits.
        logits: a floating blob (..., classes).
        name: the op name; default ``SoftmaxCrossEntropy_<n>``.

    Returns:
        The loss, shaped like logits without the last axis; (1,) for rank-1 logits (one sample).
    """
    if isinstance(labels, Blob) and isinstance(logits, Blob) and len(logits.shape) == 1:
        node = op_name(name, "SoftmaxCrossEntropy")
        labels, logits, name = _one_sample(labels, node, "labels_row"), _one_sample(logits, node, "logits_row"), node
    loss, _prob = apply("softmax_cross_entropy", [labels, logits], name=name)
    return loss


def sigmoid_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Elementwise -z log sigmoid(x) - (1 - z) log(1 - sigmoid(x)), computed stably.

    Args:
        labels: targets z in [0, 1], shaped like logits.
        logits: a floating blob x.
        name: the op name; default ``SigmoidCrossEntropy_<n>``.

    Returns:
        The loss, shaped like logits.
    """
    return apply("sigmoid_cross_entropy", [labels, logits], name=name)


def distributed_sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Legacy's class-split sparse softmax cross entropy; on one process it is the plain one.

    Args:
        labels: integer class indices shaped like logits without its last axis (or with a last axis of 1).
        logits: a floating blob (..., classes).
        name: the op name; default ``DistributedSparseSoftmaxCrossEntropy_<n>``.
    """
    node = op_name(name, "DistributedSparseSoftmaxCrossEntropy")
    return sparse_softmax_cross_entropy_with_logits(labels, logits, name=node)


# legacy v0.4's lazy losses ----------------------------------------------------------------------
REDUCTIONS = ("none", "mean", "sum")


def _reduction(what: str, reduction: Any) -> str:
    if reduction not in REDUCTIONS:
        raise build_error(what, f"reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    return str(reduction)


def _reduce(loss: Blob, reduction: str, node: str) -> Blob:
    """The loss reduced over every element to shape (1,), legacy's shape of a full reduction (its
    reduce ops never gave 0-d blobs); the last node is ``<node>_reduce_mean`` / ``<node>_reduce_sum``."""
    if reduction == "none":
        return loss
    total = apply(f"reduce_{reduction}", [loss], {"axis": None, "keepdims": False},
                  name=f"{node}_reduce_{reduction}_all")
    return apply("reshape", [total], {"shape": (1,)}, name=f"{node}_reduce_{reduction}")


def _clip_below_zero(x: Blob, name: str) -> Blob:
    return apply("clip_by_value", [x], {"min_value": 0.0, "max_value": None}, name=name)


def _pair_loss(what: str, input: Blob, target: Blob, reduction: str) -> str:  # noqa: A002 - legacy name
    floating_blob(what, "input", input)
    floating_blob(what, "target", target)
    check_same_shape(what, "target", target, "input", input)
    return _reduction(what, reduction)


def _weighted(what: str, loss: Blob, weight: Blob | None, input: Blob, node: str) -> Blob:  # noqa: A002
    if weight is None:
        return loss
    check_same_shape(what, "weight", floating_blob(what, "weight", weight), "input", input)
    return apply("multiply", [weight, loss], name=f"{node}_weight")


def L1Loss(input: Blob, target: Blob, reduction: str = "mean", name: str | None = None) -> Blob:  # noqa: N802, A002
    """|target - input|, elementwise, then reduced.

    Args:
        input: a floating blob.
        target: a floating blob of input's shape.
        reduction: "none" (the elementwise loss), "mean" or "sum" (shape (1,)).
        name: the node name prefix; default ``L1Loss_<n>``.
    """
    reduction = _pair_loss("flow.nn.L1Loss", input, target, reduction)
    node = op_name(name, "L1Loss")
    loss = apply("abs", [apply("subtract", [target, input], name=f"{node}_sub")], name=f"{node}_abs")
    return _reduce(loss, reduction, node)


def MSELoss(input: Blob, target: Blob, reduction: str = "mean", name: str | None = None) -> Blob:  # noqa: N802, A002
    """(target - input) ** 2, elementwise, then reduced.

    Args:
        input: a floating blob.
        target: a floating blob of input's shape.
        reduction: "none" (the elementwise loss), "mean" or "sum" (shape (1,)).
        name: the node name prefix; default ``MSELoss_<n>``.
    """
    reduction = _pair_loss("flow.nn.MSELoss", input, target, reduction)
    node = op_name(name, "MSELoss")
    difference = apply("subtract", [target, input], name=f"{node}_mean_squared_subtract")
    loss = apply("square", [difference], name=f"{node}_mean_squared_square")
    return _reduce(loss, reduction, node)


def BCELoss(input: Blob, target: Blob, weight: Blob | None = None, reduction: str = "mean",  # noqa: N802, A002
            name: str | None = None) -> Blob:
    """Binary cross entropy of probabilities: -(target log(input) + (1 - target) log(1 - input)).

    Args:
        input: a floating blob of probabilities in (0, 1).
        target: a floating blob of input's shape.
        weight: None, or a floating blob of input's shape scaling each element's loss.
        reduction: "none" (the elementwise loss), "mean" or "sum" (shape (1,)).
        name: the node name prefix; default ``BCELoss_<n>``.
    """
    what = "flow.nn.BCELoss"
    reduction = _pair_loss(what, input, target, reduction)
    node = op_name(name, "BCELoss")
    pos = apply("multiply", [target, apply("log", [input], name=f"{node}_log")], name=f"{node}_pos")
    one_minus_input = apply("scalar_rsub", [input], {"scalar": 1.0}, name=f"{node}_one_minus_input")
    one_minus_target = apply("scalar_rsub", [target], {"scalar": 1.0}, name=f"{node}_one_minus_target")
    log1m = apply("log", [one_minus_input], name=f"{node}_log1m")
    neg = apply("multiply", [one_minus_target, log1m], name=f"{node}_neg")
    loss = apply("negative", [apply("add", [pos, neg], name=f"{node}_add")], name=f"{node}_negative")
    return _reduce(_weighted(what, loss, weight, input, node), reduction, node)


def BCEWithLogitsLoss(input: Blob, target: Blob, weight: Blob | None = None,  # noqa: N802, A002
                      pos_weight: Blob | None = None, reduction: str = "mean", name: str | None = None) -> Blob:
    """Binary cross entropy of logits, in the overflow-free form
    (1 - target) x + w (log(exp(-m) + exp(-x - m)) + m), m = max(-x, 0), w = 1 + (pos_weight - 1) target.

    Args:
        input: a floating blob of logits.
        target: a floating blob of input's shape.
        weight: None, or a floating blob of input's shape scaling each element's loss.
        pos_weight: None, or a 1-D floating blob with one weight of the positive term per class
            (input's last axis).
        reduction: "none" (the elementwise loss), "mean" or "sum" (shape (1,)).
        name: the node name prefix; default ``BCEWithLogitsLoss_<n>``.
    """
    what = "flow.nn.BCEWithLogitsLoss"
    reduction = _pair_loss(what, input, target, reduction)
    node = op_name(name, "BCEWithLogitsLoss")
    neg_input = apply("negative", [input], name=f"{node}_neg_input")
    max_val = apply("clip_by_value", [neg_input], {"min_value": 0.0, "max_value": None}, name=f"{node}_max_val")
    exp1 = apply("exp", [apply("negative", [max_val], name=f"{node}_neg_max_val")], name=f"{node}_exp1")
    exp2 = apply("exp", [apply("subtract", [neg_input, max_val], name=f"{node}_shift")], name=f"{node}_exp2")
    exps = apply("add", [exp1, exp2], name=f"{node}_exp_sum")
    # log(1 + exp(-x))
    softplus = apply("add", [apply("log", [exps], name=f"{node}_log"), max_val], name=f"{node}_softplus")
    if pos_weight is not None:
        floating_blob(what, "pos_weight", pos_weight)
        classes = input.shape[-1] if len(input.shape) else None
        if tuple(pos_weight.shape) != (classes,):
            raise build_error(what, f"pos_weight must be 1-D with one entry per class (input's last axis, "
                                    f"{classes}), got shape {tuple(pos_weight.shape)}")
        pos_weight_m1 = apply("scalar_add", [pos_weight], {"scalar": -1.0}, name=f"{node}_pos_weight_m1")
        pos_target = apply("multiply", [pos_weight_m1, target], name=f"{node}_pos_target")
        log_weight = apply("scalar_add", [pos_target], {"scalar": 1.0}, name=f"{node}_log_weight")
        softplus = apply("multiply", [log_weight, softplus], name=f"{node}_weighted_softplus")
    one_minus_target = apply("scalar_rsub", [target], {"scalar": 1.0}, name=f"{node}_one_minus_target")
    linear = apply("multiply", [one_minus_target, input], name=f"{node}_linear")
    loss = apply("add", [linear, softplus], name=f"{node}_loss")
    return _reduce(_weighted(what, loss, weight, input, node), reduction, node)


def MarginRankingLoss(input1: Blob, input2: Blob, target: Blob, margin: float = 0.0,  # noqa: N802
                      reduction: str = "mean", name: str | None = None) -> Blob:
    """max(0, margin - target (input1 - input2)), elementwise, then reduced.

    Args:
        input1: a floating blob.
        input2: a floating blob of input1's shape.
        target: a floating blob broadcastable to input1's shape (1 ranks input1 first, -1 input2).
        margin: a number.
        reduction: "none" (the elementwise loss), "mean" or "sum" (shape (1,)).
        name: the node name prefix; default ``MarginRankingLoss_<n>``.
    """
    what = "flow.nn.MarginRankingLoss"
    floating_blob(what, "input1", input1)
    check_same_shape(what, "input2", floating_blob(what, "input2", input2), "input1", input1)
    floating_blob(what, "target", target)
    margin = real_number(what, "margin", margin)
    reduction = _reduction(what, reduction)
    node = op_name(name, "MarginRankingLoss")
    gap = apply("negative", [apply("subtract", [input1, input2], name=f"{node}_sub")], name=f"{node}_negative")
    loss = apply("scalar_add", [apply("multiply", [target, gap], name=f"{node}_mul")], {"scalar": margin},
                 name=f"{node}_add_margin")
    return _reduce(_clip_below_zero(loss, f"{node}_clip"), reduction, node)


def _p_norm(x: Blob, p: float, node: str) -> Blob:
    """The p-norm of each row (axis 1): sqrt of the sum of squares for p = 2, as legacy did."""
    size = apply("abs", [x], name=f"{node}_abs")
    if p == 2.0:
        squares = apply("square", [size], name=f"{node}_square")
        total = apply("reduce_sum", [squares], {"axis": 1, "keepdims": False}, name=f"{node}_sum")
        return apply("sqrt", [total], name=f"{node}_sqrt")
    powers = apply("scalar_pow", [size], {"scalar": p}, name=f"{node}_pow")
    total = apply("reduce_sum", [powers], {"axis": 1, "keepdims": False}, name=f"{node}_sum")
    return apply("scalar_pow", [total], {"scalar": 1.0 / p}, name=f"{node}_norm_val")


def TripletMarginLoss(anchor: Blob, positive: Blob, negative: Blob, margin: float = 1.0,  # noqa: N802
                      p: float = 2.0, eps: float = 1e-6, swap: bool = False, reduction: str = "mean",
                      name: str | None = None) -> Blob:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) per row, with d(a, b) = ||a - b + eps||_p.

    Args:
        anchor: a floating (N, D) blob.
        positive: a floating blob of anchor's shape.
        negative: a floating blob of anchor's shape.
        margin: a number.
        p: the norm's degree, a positive number.
        eps: added to each difference before the norm (keeps the norm's gradient finite at 0).
        swap: use min(d(anchor, negative), d(positive, negative)) as the negative distance.
        reduction: "none" (one loss per row, shape (N,)), "mean" or "sum".
        name: the node name prefix; default ``TripletMarginLoss_<n>``.
    """
    what = "flow.nn.TripletMarginLoss"
    floating_blob(what, "anchor", anchor)
    if len(anchor.shape) != 2:
        raise build_error(what, f"anchor must be a 2-D (N, D) blob, got shape {tuple(anchor.shape)}")
    check_same_shape(what, "positive", floating_blob(what, "positive", positive), "anchor", anchor)
    check_same_shape(what, "negative", floating_blob(what, "negative", negative), "anchor", anchor)
    margin, eps = real_number(what, "margin", margin), real_number(what, "eps", eps)
    p = real_number(what, "p", p)
    if p <= 0:
        raise build_error(what, f"p must be positive, got {p!r}")
    if not isinstance(swap, bool):
        raise build_error(what, f"swap must be a bool, got {swap!r}")
    reduction = _reduction(what, reduction)
    node = op_name(name, "TripletMarginLoss")

    def distance(a: Blob, b: Blob, part: str) -> Blob:
        diff = apply("scalar_add", [apply("subtract", [a, b], name=f"{node}_{part}_sub")], {"scalar": eps},
                     name=f"{node}_{part}_eps")
        return _p_norm(diff, p, f"{node}_{part}")

    d_pos = distance(anchor, positive, "distance_1")
    d_neg = distance(anchor, negative, "distance_2")
    if swap:
        d_neg = apply("minimum", [d_neg, distance(positive, negative, "distance_swap")], name=f"{node}_swap")
    d_pos_margin = apply("scalar_add", [d_pos], {"scalar": margin}, name=f"{node}_add_margin")
    gap = apply("subtract", [d_pos_margin, d_neg], name=f"{node}_gap")
    return _reduce(_clip_below_zero(gap, f"{node}_clip"), reduction, node)


def KLDivLoss(input: Blob, target: Blob, log_target: bool = False, reduction: str = "mean",  # noqa: N802, A002
              name: str | None = None) -> Blob:
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target``, elementwise, then reduced.

    ``log_target=False``: target (log(target) - input), 0 where target <= 0;
    ``log_target=True``: exp(target) (target - input).

    Args:
        input: a floating blob of log-probabilities.
        target: a floating blob of input's shape: probabilities, or log-probabilities with log_target.
        log_target: whether target holds log-probabilities.
        reduction: "none" (the elementwise loss), "mean" (over every element) or "sum".
        name: the node name prefix; default ``KLDivLoss_<n>``.
    """
    what = "flow.nn.KLDivLoss"
    reduction = _pair_loss(what, input, target, reduction)
    if not isinstance(log_target, bool):
        raise build_error(what, f"log_target must be a bool, got {log_target!r}")
    node = op_name(name, "KLDivLoss")
    if log_target:
        gap = apply("subtract", [target, input], name=f"{node}_sub")
        loss = apply("multiply", [apply("exp", [target], name=f"{node}_exp"), gap], name=f"{node}_mul")
        return _reduce(loss, reduction, node)
    positive = apply("greater", [target, number_as_blob("greater", 0.0, target)], name=f"{node}_positive")
    ones = apply("ones_like", [target], name=f"{node}_ones")
    safe_target = apply("where", [positive, target, ones], name=f"{node}_safe_target")  # log sees 1 where masked
    gap = apply("subtract", [apply("log", [safe_target], name=f"{node}_log"), input], name=f"{node}_sub")
    loss = apply("multiply", [target, gap], name=f"{node}_mul")
    zeros = apply("zeros_like", [loss], name=f"{node}_zeros")
    return _reduce(apply("where", [positive, loss, zeros], name=f"{node}_where"), reduction, node)


# top-level losses --------------------------------------------------------------------------------
def smooth_l1_loss(prediction: Blob, label: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """Elementwise smooth L1: 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2, d = prediction - label.

    Args:
        prediction: a floating blob.
        label: a blob like prediction (not differentiated, as legacy).
        beta: the switch point, >= 0 (0 gives |d|).
        name: the op name; default ``SmoothL1Loss_<n>``.

    Returns:
        The loss, shaped like prediction and not reduced.
    """
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or beta < 0:
        raise build_error("flow.smooth_l1_loss", f"beta must be a number >= 0, got {beta!r}")
    return apply("smooth_l1_loss", [prediction, label], {"beta": float(beta)}, name=name)


def combined_margin_loss(x: Blob, label: Blob, m1: float = 1, m2: float = 0, m3: float = 0,
                         name: str | None = None) -> Blob:
    """ArcFace-style combined margin on cosine logits: at each row's label, cos(m1 * acos(x) + m2) - m3.

    Args:
        x: a floating (N, classes) blob of cosines in [-1, 1].
        label: an integer (N,) blob; a label outside [0, classes) leaves its row unchanged.
        m1: the multiplicative angular margin.
        m2: the additive angular margin.
        m3: the additive cosine margin.
        name: the op name; default ``CombinedMarginLoss_<n>``.

    Returns:
        A blob like x.
    """
    return apply("combined_margin_loss", [x, label], {"m1": m1, "m2": m2, "m3": m3}, name=name)


def ctc_loss(log_probs: Blob, targets: Blob, input_lengths: Blob, target_lengths: Blob, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False, name: str | None = None) -> Blob:
    """Connectionist Temporal Classification loss (Graves et al. 2006), as legacy v0.4.

    Args:
        log_probs: a floating (T, N, C) blob of log-probabilities (usually log_softmax outputs).
        targets: an integer (N, S) blob of label indices, padded past each target length.
        input_lengths: an integer (N,) blob, each in [1, T].
        target_lengths: an integer (N,) blob, each in [0, S].
        blank: the blank label, in [0, C).
        reduction: "none" (the (N,) losses), "sum", or "mean" (each loss divided by its target
            length, at least 1, then averaged: legacy's reduction).
        zero_infinity: an impossible alignment's infinite loss (and its gradient) become 0.
        name: the op name; default ``CTCLoss_<n>``; the reduction's nodes are named after it.

    Returns:
        The losses (N,) for "none", else a (1,)-shaped blob.
    """
    what = "flow.ctc_loss"
    if reduction not in ("none", "sum", "mean"):
        raise build_error(what, f'reduction must be "none", "sum" or "mean", got {reduction!r}')
    if not isinstance(zero_infinity, bool):
        raise build_error(what, f"zero_infinity must be a bool, got {zero_infinity!r}")
    node = op_name(name, "CTCLoss")
    loss = apply("ctc_loss", [log_probs, targets, input_lengths, target_lengths],
                 {"blank": blank, "zero_infinity": zero_infinity}, name=node)
    if zero_infinity:  # legacy: where(loss == inf, zeros, loss)
        infinite = apply("equal", [loss, number_as_blob("equal", float("inf"), loss)], name=f"{node}_equal")
        zeros = apply("zeros_like", [loss], name=f"{node}_zeros")
        loss = apply("where", [infinite, zeros, loss], name=f"{node}_where")
    if reduction == "sum":
        return apply("reduce_sum", [loss], {"axis": None, "keepdims": False}, name=f"{node}_reduce_sum")
    if reduction == "mean":
        lengths = apply("clip_by_value", [target_lengths], {"min_value": 1, "max_value": None},
                        name=f"{node}_clip_by_value")
        lengths = apply("cast", [lengths], {"dtype": dtypes.as_dtype(log_probs.dtype)}, name=f"{node}_cast")
        per_length = apply("xdivy", [loss, lengths], name=f"{node}_xdivy")
        return apply("reduce_mean", [per_length], {"axis": None, "keepdims": False}, name=f"{node}_reduce_mean")
    return loss
