"""Top-level ``flow.*`` names of legacy v0.4 left over: smooth_l1_loss, count_not_finite,
multi_count_not_finite, combined_margin_loss, ctc_loss and categorical_ordinal_encode.

The face lists this module's ``__all__`` without importing it: keep it a literal list.
"""
from __future__ import annotations

import numbers
from typing import Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name

__all__ = ["categorical_ordinal_encode", "combined_margin_loss", "count_not_finite", "ctc_loss",
           "multi_count_not_finite", "smooth_l1_loss",
           "acc", "repeat",  # flowjob_ops.repeat_acc (legacy time-shape ops)
           "pack", "unpack"]  # flowjob_ops.repeat_acc (legacy time-shape ops cutting axis 0)


def _blob(what: str, arg: str, value: object) -> Blob:
    if not isinstance(value, Blob):
        raise TypeError(f"{what}: {arg} must be a blob, got {type(value).__name__}")
    return value


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


def count_not_finite(x: Blob, name: str | None = None) -> Blob:
    """How many elements of ``x`` are inf or nan, as an int64 blob of shape (1,).

    Args:
        x: a floating blob.
        name: the op name; default ``CountNotFinite_<n>``.
    """
    return apply("count_not_finite", [_blob("flow.count_not_finite", "x", x)], name=name)


def multi_count_not_finite(x: Sequence[Blob] | None = None, name: str | None = None) -> Blob:
    """How many elements of all the blobs in ``x`` are inf or nan, as an int64 blob of shape (1,).

    Args:
        x: a non-empty list of floating blobs of one dtype.
        name: the op name; default ``MultiCountNotFinite_<n>``.
    """
    blobs = list(x) if isinstance(x, (list, tuple)) else None
    if not blobs:
        raise build_error("flow.multi_count_not_finite", f"x must be a non-empty list of blobs, got {x!r}")
    for i, blob in enumerate(blobs):
        _blob("flow.multi_count_not_finite", f"x[{i}]", blob)
    return apply("multi_count_not_finite", blobs, name=name)


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
    from flowjob_ops import array_ops, math

    node = op_name(name, "CTCLoss")
    loss = apply("ctc_loss", [log_probs, targets, input_lengths, target_lengths],
                 {"blank": blank, "zero_infinity": zero_infinity}, name=node)
    if zero_infinity:  # legacy: where(loss == inf, zeros, loss)
        infinite = math.equal(loss, float("inf"), name=f"{node}_equal")
        zeros = apply("zeros_like", [loss], name=f"{node}_zeros")
        loss = array_ops.where(infinite, zeros, loss, name=f"{node}_where")
    if reduction == "sum":
        return math.reduce_sum(loss, name=f"{node}_reduce_sum")
    if reduction == "mean":
        lengths = array_ops.clip_by_value(target_lengths, min_value=1, name=f"{node}_clip_by_value")
        lengths = array_ops.cast(lengths, dtype=log_probs.dtype, name=f"{node}_cast")
        return math.reduce_mean(math.xdivy(loss, lengths, name=f"{node}_xdivy"), name=f"{node}_reduce_mean")
    return loss


def categorical_ordinal_encode(table: Blob, size: Blob, input_tensor: Blob, hash_precomputed: bool = True,
                               name: str | None = None) -> Blob:
    """Ordinals 1, 2, ... for the distinct values of ``input_tensor``, by first appearance, kept in a hash table.

    ``table`` (2 * capacity,) and ``size`` (1,) are usually non-trainable variables initialised to 0
    (``flow.layers.categorical_ordinal_encoder`` makes them); each step writes new keys into them, so
    a value keeps its ordinal across steps. The value 0 marks an empty slot and encodes to 0.

    Args:
        table: an int32/int64 variable of (key, ordinal) pairs.
        size: an int32/int64 (1,) variable, the ordinals handed out so far.
        input_tensor: an int32/int64 blob of precomputed hash values (non-negative).
        hash_precomputed: must be True (legacy supported nothing else).
        name: the op name; default ``CategoricalOrdinalEncode_<n>``.

    Returns:
        A blob like input_tensor.
    """
    what = "flow.categorical_ordinal_encode"
    if hash_precomputed is not True:
        raise build_error(what, f"hash_precomputed must be True (legacy supported no other mode), got "
                                f"{hash_precomputed!r}")
    blobs = [_blob(what, arg, value) for arg, value in
             (("input_tensor", input_tensor), ("table", table), ("size", size))]
    return apply("categorical_ordinal_encode", blobs, {"hash_precomputed": True}, name=name)


from flowjob_ops.repeat_acc import acc, repeat  # noqa: E402  (flow.repeat / flow.acc: time-shape ops)
from flowjob_ops.repeat_acc import pack, unpack  # noqa: E402  (flow.unpack / flow.pack: ticks of axis-0 slices)
