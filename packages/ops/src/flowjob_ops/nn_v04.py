"""Legacy v0.4's lazy ``flow.nn`` losses, normalizations and pixel shuffles, composed from existing ops.

Each function builds the nodes legacy's Python built (so values and gradients are those of the
parts), under node names ``<name>_<part>``; the last node of a reduced loss is ``<name>_reduce_mean``
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

from flowjob_core import Blob, get_variable

from flowjob_ops import array_ops, initializers
from flowjob_ops import math as fm
from flowjob_ops.records.common import build_error, op_name

__all__ = ["BCELoss", "BCEWithLogitsLoss", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
           "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss", "PixelShuffle", "PixelShufflev2",
           "TripletMarginLoss"]

REDUCTIONS = ("none", "mean", "sum")


# argument checks ---------------------------------------------------------------------------
def _blob(what: str, arg: str, value: Any) -> Blob:
    if not isinstance(value, Blob):
        raise TypeError(f"{what}: {arg} must be a blob of this job, got {type(value).__name__}")
    return value


def _floating(what: str, arg: str, value: Any) -> Blob:
    blob = _blob(what, arg, value)
    if blob.dtype.kind != "f":
        raise build_error(what, f"{arg} must be a floating blob, got {blob.dtype}")
    return blob


def _same_shape(what: str, arg: str, blob: Blob, ref_arg: str, ref: Blob) -> None:
    if tuple(blob.shape) != tuple(ref.shape):
        raise build_error(what, f"{arg} must have the shape of {ref_arg} {tuple(ref.shape)}, got {tuple(blob.shape)}")


def _reduction(what: str, reduction: Any) -> str:
    if reduction not in REDUCTIONS:
        raise build_error(what, f"reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    return str(reduction)


def _number(what: str, arg: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"{arg} must be a number, got {value!r}")
    return float(value)


def _positive_int(what: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) <= 0:
        raise build_error(what, f"{arg} must be a positive int, got {value!r}")
    return int(value)


def _reduce(loss: Blob, reduction: str, node: str) -> Blob:
    """The loss reduced over every element to shape (1,), legacy's shape of a full reduction (its
    reduce ops never gave 0-d blobs); the last node is ``<node>_reduce_mean`` / ``<node>_reduce_sum``."""
    if reduction == "none":
        return loss
    reduce = fm.reduce_mean if reduction == "mean" else fm.reduce_sum
    total = reduce(loss, name=f"{node}_reduce_{reduction}_all")
    return array_ops.reshape(total, (1,), name=f"{node}_reduce_{reduction}")


def _pair_loss(what: str, input: Blob, target: Blob, reduction: str) -> str:  # noqa: A002 - legacy name
    _floating(what, "input", input)
    _floating(what, "target", target)
    _same_shape(what, "target", target, "input", input)
    return _reduction(what, reduction)


def _weighted(what: str, loss: Blob, weight: Blob | None, input: Blob, node: str) -> Blob:  # noqa: A002
    if weight is None:
        return loss
    _same_shape(what, "weight", _floating(what, "weight", weight), "input", input)
    return fm.multiply(weight, loss, name=f"{node}_weight")


# losses -------------------------------------------------------------------------------------
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
    loss = fm.abs(fm.subtract(target, input, name=f"{node}_sub"), name=f"{node}_abs")
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
    loss = fm.squared_difference(target, input, name=f"{node}_mean_squared")
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
    pos = fm.multiply(target, fm.log(input, name=f"{node}_log"), name=f"{node}_pos")
    one_minus_input = fm.subtract(1.0, input, name=f"{node}_one_minus_input")
    one_minus_target = fm.subtract(1.0, target, name=f"{node}_one_minus_target")
    neg = fm.multiply(one_minus_target, fm.log(one_minus_input, name=f"{node}_log1m"), name=f"{node}_neg")
    loss = fm.negative(fm.add(pos, neg, name=f"{node}_add"), name=f"{node}_negative")
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
    neg_input = fm.negative(input, name=f"{node}_neg_input")
    max_val = array_ops.clip_by_value(neg_input, min_value=0.0, name=f"{node}_max_val")
    exps = fm.add(fm.exp(fm.negative(max_val, name=f"{node}_neg_max_val"), name=f"{node}_exp1"),
                  fm.exp(fm.subtract(neg_input, max_val, name=f"{node}_shift"), name=f"{node}_exp2"),
                  name=f"{node}_exp_sum")
    softplus = fm.add(fm.log(exps, name=f"{node}_log"), max_val, name=f"{node}_softplus")  # log(1 + exp(-x))
    if pos_weight is not None:
        _floating(what, "pos_weight", pos_weight)
        classes = input.shape[-1] if len(input.shape) else None
        if tuple(pos_weight.shape) != (classes,):
            raise build_error(what, f"pos_weight must be 1-D with one entry per class (input's last axis, "
                                    f"{classes}), got shape {tuple(pos_weight.shape)}")
        log_weight = fm.add(fm.multiply(fm.subtract(pos_weight, 1.0, name=f"{node}_pos_weight_m1"), target,
                                        name=f"{node}_pos_target"), 1.0, name=f"{node}_log_weight")
        softplus = fm.multiply(log_weight, softplus, name=f"{node}_weighted_softplus")
    one_minus_target = fm.subtract(1.0, target, name=f"{node}_one_minus_target")
    loss = fm.add(fm.multiply(one_minus_target, input, name=f"{node}_linear"), softplus, name=f"{node}_loss")
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
    _floating(what, "input1", input1)
    _same_shape(what, "input2", _floating(what, "input2", input2), "input1", input1)
    _floating(what, "target", target)
    margin = _number(what, "margin", margin)
    reduction = _reduction(what, reduction)
    node = op_name(name, "MarginRankingLoss")
    gap = fm.negative(fm.subtract(input1, input2, name=f"{node}_sub"), name=f"{node}_negative")
    loss = fm.add(margin, fm.multiply(target, gap, name=f"{node}_mul"), name=f"{node}_add_margin")
    return _reduce(array_ops.clip_by_value(loss, min_value=0.0, name=f"{node}_clip"), reduction, node)


def _p_norm(x: Blob, p: float, node: str) -> Blob:
    """The p-norm of each row (axis 1): sqrt of the sum of squares for p = 2, as legacy did."""
    size = fm.abs(x, name=f"{node}_abs")
    if p == 2.0:
        total = fm.reduce_sum(fm.square(size, name=f"{node}_square"), axis=1, name=f"{node}_sum")
        return fm.sqrt(total, name=f"{node}_sqrt")
    total = fm.reduce_sum(fm.pow(size, p, name=f"{node}_pow"), axis=1, name=f"{node}_sum")
    return fm.pow(total, 1.0 / p, name=f"{node}_norm_val")


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
    _floating(what, "anchor", anchor)
    if len(anchor.shape) != 2:
        raise build_error(what, f"anchor must be a 2-D (N, D) blob, got shape {tuple(anchor.shape)}")
    _same_shape(what, "positive", _floating(what, "positive", positive), "anchor", anchor)
    _same_shape(what, "negative", _floating(what, "negative", negative), "anchor", anchor)
    margin, eps = _number(what, "margin", margin), _number(what, "eps", eps)
    p = _number(what, "p", p)
    if p <= 0:
        raise build_error(what, f"p must be positive, got {p!r}")
    if not isinstance(swap, bool):
        raise build_error(what, f"swap must be a bool, got {swap!r}")
    reduction = _reduction(what, reduction)
    node = op_name(name, "TripletMarginLoss")

    def distance(a: Blob, b: Blob, part: str) -> Blob:
        diff = fm.add(fm.subtract(a, b, name=f"{node}_{part}_sub"), eps, name=f"{node}_{part}_eps")
        return _p_norm(diff, p, f"{node}_{part}")

    d_pos = distance(anchor, positive, "distance_1")
    d_neg = distance(anchor, negative, "distance_2")
    if swap:
        d_neg = fm.minimum(d_neg, distance(positive, negative, "distance_swap"), name=f"{node}_swap")
    gap = fm.subtract(fm.add(d_pos, margin, name=f"{node}_add_margin"), d_neg, name=f"{node}_gap")
    return _reduce(array_ops.clip_by_value(gap, min_value=0.0, name=f"{node}_clip"), reduction, node)


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
        gap = fm.subtract(target, input, name=f"{node}_sub")
        return _reduce(fm.multiply(fm.exp(target, name=f"{node}_exp"), gap, name=f"{node}_mul"), reduction, node)
    positive = fm.greater(target, 0.0, name=f"{node}_positive")
    ones = array_ops.ones_like(target, name=f"{node}_ones")
    safe_target = array_ops.where(positive, target, ones, name=f"{node}_safe_target")  # log sees 1 where masked
    gap = fm.subtract(fm.log(safe_target, name=f"{node}_log"), input, name=f"{node}_sub")
    loss = fm.multiply(target, gap, name=f"{node}_mul")
    zeros = array_ops.zeros_like(loss, name=f"{node}_zeros")
    return _reduce(array_ops.where(positive, loss, zeros, name=f"{node}_where"), reduction, node)


# normalization ---------------------------------------------------------------------------------
def _affine(x: Blob, normalized: Blob, channels: int, node: str) -> Blob:
    """gamma * normalized + beta with trainable (1, C, 1) variables ``<node>_gamma`` (ones) and ``<node>_beta``."""
    gamma = get_variable(f"{node}_gamma", shape=(1, channels, 1), dtype=x.dtype,
                         initializer=initializers.ones_initializer(), trainable=True)
    beta = get_variable(f"{node}_beta", shape=(1, channels, 1), dtype=x.dtype,
                        initializer=initializers.zeros_initializer(), trainable=True)
    return fm.add(fm.multiply(gamma, normalized, name=f"{node}_scale"), beta, name=f"{node}_shift")


def _normalize(x: Blob, eps: float, node: str) -> Blob:
    """(x - mean) / sqrt(variance + eps) over the last axis of a 3-D blob."""
    from flowjob_ops import nn  # nn imports this module at its end

    mean, variance = nn.moments(x, [2], keepdims=True, name=f"{node}_moments")
    centered = fm.subtract(x, mean, name=f"{node}_center")
    std = fm.sqrt(fm.add(variance, eps, name=f"{node}_add_eps"), name=f"{node}_std")
    return fm.divide(centered, std, name=f"{node}_normalize")


def _check_norm(what: str, x: Any, eps: Any, affine: Any) -> float:
    _floating(what, "x", x)
    if not isinstance(affine, bool):
        raise build_error(what, f"affine must be a bool, got {affine!r}")
    eps = _number(what, "eps", eps)
    if eps < 0:
        raise build_error(what, f"eps must not be negative, got {eps!r}")
    return eps


def GroupNorm(x: Blob, num_groups: int = 32, eps: float = 1e-05, affine: bool = True,  # noqa: N802
              name: str | None = None) -> Blob:
    """Normalizes each sample's channel groups to zero mean and unit variance (over the group's channels
    and all spatial positions), then scales and shifts per channel when ``affine``.

    Args:
        x: a floating (N, C, ...) blob of rank >= 3.
        num_groups: how many groups the C channels form; it must divide C.
        eps: added to the variance.
        affine: learn a per-channel scale ``<name>_gamma`` (ones) and shift ``<name>_beta`` (zeros).
        name: the node and variable name prefix; default ``GroupNorm_<n>``.
    """
    what = "flow.nn.GroupNorm"
    eps = _check_norm(what, x, eps, affine)
    if len(x.shape) < 3:
        raise build_error(what, f"x must have rank >= 3 (N, C, ...), got shape {tuple(x.shape)}")
    num_groups = _positive_int(what, "num_groups", num_groups)
    batch, channels = x.shape[0], x.shape[1]
    if channels % num_groups:
        raise build_error(what, f"num_groups {num_groups} must divide the {channels} channels of x")
    node = op_name(name, "GroupNorm")
    grouped = array_ops.reshape(x, (batch, num_groups, -1), name=f"{node}_reshape_groups")
    normalized = array_ops.reshape(_normalize(grouped, eps, node), (batch, channels, -1),
                                   name=f"{node}_reshape_channels")
    if affine:
        normalized = _affine(x, normalized, channels, node)
    return array_ops.reshape(normalized, tuple(x.shape), name=f"{node}_reshape_back")


def _instance_norm(what: str, rank: int, x: Blob, eps: Any, affine: Any, name: str | None, prefix: str) -> Blob:
    eps = _check_norm(what, x, eps, affine)
    if len(x.shape) != rank:
        raise build_error(what, f"x must be a {rank}-D (N, C, ...) blob, got shape {tuple(x.shape)}")
    node = op_name(name, prefix)
    flat = x if rank == 3 else array_ops.reshape(x, (x.shape[0], x.shape[1], -1), name=f"{node}_reshape_1d")
    out = _normalize(flat, eps, node)
    if affine:
        out = _affine(x, out, x.shape[1], node)
    return out if rank == 3 else array_ops.reshape(out, tuple(x.shape), name=f"{node}_reshape_back")


def InstanceNorm1d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """Normalizes each sample's channels over their length, then scales and shifts per channel when ``affine``.

    Args:
        x: a floating (N, C, L) blob.
        eps: added to the variance.
        affine: learn a per-channel scale ``<name>_gamma`` (ones) and shift ``<name>_beta`` (zeros).
        name: the node and variable name prefix; default ``InstanceNorm1D_<n>``.
    """
    return _instance_norm("flow.nn.InstanceNorm1d", 3, x, eps, affine, name, "InstanceNorm1D")


def InstanceNorm2d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """InstanceNorm1d over each channel's H x W positions of a floating (N, C, H, W) blob."""
    return _instance_norm("flow.nn.InstanceNorm2d", 4, x, eps, affine, name, "InstanceNorm2D")


def InstanceNorm3d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """InstanceNorm1d over each channel's D x H x W positions of a floating (N, C, D, H, W) blob."""
    return _instance_norm("flow.nn.InstanceNorm3d", 5, x, eps, affine, name, "InstanceNorm3D")


# pixel shuffle ------------------------------------------------------------------------------------
def PixelShufflev2(input: Blob, h_upscale_factor: int, w_upscale_factor: int,  # noqa: N802, A002
                   name: str | None = None) -> Blob:
    """Moves channel blocks into space: (N, C * h * w, H, W) to (N, C, H * h, W * w).

    Args:
        input: a 4-D (N, C, H, W) blob; C must be a multiple of h_upscale_factor * w_upscale_factor.
        h_upscale_factor: the height factor h, a positive int.
        w_upscale_factor: the width factor w, a positive int.
        name: the node name prefix; default ``PixelShufflev2_<n>``.
    """
    what = "flow.nn.PixelShufflev2"
    _blob(what, "input", input)
    h = _positive_int(what, "h_upscale_factor", h_upscale_factor)
    w = _positive_int(what, "w_upscale_factor", w_upscale_factor)
    if len(input.shape) != 4:
        raise build_error(what, f"input must be a 4-D (N, C, H, W) blob, got shape {tuple(input.shape)}")
    batch, channels, height, width = input.shape
    if channels % (h * w):
        raise build_error(what, f"the {channels} channels of input must be a multiple of "
                                f"h_upscale_factor * w_upscale_factor = {h * w}")
    node = op_name(name, "PixelShufflev2")
    out = array_ops.reshape(input, (batch, channels // (h * w), h, w, height, width), name=f"{node}_reshape1")
    out = array_ops.transpose(out, [0, 1, 4, 2, 5, 3], name=f"{node}_transpose")
    return array_ops.reshape(out, (batch, channels // (h * w), height * h, width * w), name=f"{node}_reshape2")


def PixelShuffle(input: Blob, upscale_factor: int, name: str | None = None) -> Blob:  # noqa: N802, A002
    """PixelShufflev2 with one factor r for height and width: (N, C * r * r, H, W) to (N, C, H * r, W * r).

    Args:
        input: a 4-D (N, C, H, W) blob; C must be a multiple of upscale_factor ** 2.
        upscale_factor: r, a positive int.
        name: the node name prefix; default ``PixelShufflev2_<n>``.
    """
    _positive_int("flow.nn.PixelShuffle", "upscale_factor", upscale_factor)
    return PixelShufflev2(input, upscale_factor, upscale_factor, name=name)
