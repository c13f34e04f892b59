"""Train-mode batch normalization as one op: the batch statistics, the normalization and its
gradient each in a single kernel.

``flow.layers.batch_normalization`` in a train job used to emit ``moments`` + ``batch_norm`` and,
through autodiff, ``batch_norm_grad`` + ``moments_grad`` + an ``add_n`` of their two input
gradients: about nine passes over the activation forward and fifteen backward, with reductions over
the strided (batch, spatial) axes of an NCHW blob. The kernels here, the reference every backend
runs, take x seen as (outer, channels, inner) with the channel on ``axis`` and make whole-array
passes over it; the cpu backend runs cache-blocked variants of them
(``flowjob_ops.overrides.cpu.batch_norm``).

The variance stays the two-pass one (centre, then square): E[x^2] - E[x]^2 cancels badly when the
mean is large against the spread. The centred values go into the output buffer, which the affine
step then overwrites in place.

Outputs are (y, mean, biased variance); the layer feeds the last two to the moving-average updates.
The gradient is the full one through the batch statistics:
dx = gamma / sigma * (dy - mean(dy) - xhat * mean(dy * xhat)), dgamma = sum(dy * xhat),
dbeta = sum(dy), with xhat = (x - mean) / sigma, sigma = sqrt(variance + epsilon). Gradients that
reach the mean or variance outputs themselves (nothing in the layer, but a user may read them) flow
back through ``moments_grad``.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops import layout_rules
from flowjob_ops.records.common import normalize_axis, require_floating, same_dtype
from flowjob_ops.records.normalization import check_epsilon


def _param_names(attrs: dict) -> list[str]:
    return [n for n, flag in (("gamma", attrs.get("with_scale")), ("beta", attrs.get("with_offset"))) if flag]


def _axis_and_channels(x: BlobSpec, attrs: dict, op: str) -> tuple[int, int]:
    if len(x.shape) < 2:
        raise ShapeError(f"{op}: x must have rank >= 2 (a batch axis and a channel axis), got shape {x.shape}")
    try:
        axis = normalize_axis(attrs.get("axis"), len(x.shape))
    except ValueError as exc:
        raise ShapeError(f"{op}: {exc}") from None
    if math.prod(x.shape) // x.shape[axis] == 0:
        raise ShapeError(f"{op}: no values to take statistics over in x of shape {x.shape}")
    return axis, x.shape[axis]


def _check_params(params: Sequence[BlobSpec], names: Sequence[str], channels: int, op: str) -> None:
    for name, spec in zip(names, params):
        if spec.shape != (channels,):
            raise ShapeError(f"{op}: {name} must have shape ({channels},) (x's channels), got {spec.shape}")


ACTIVATIONS = (None, "relu")


def _check_activation(attrs: dict, op: str) -> bool:
    """Whether a ReLU follows the normalization (made by the fusion pass); other values are errors."""
    activation = attrs.get("activation")
    if activation not in ACTIVATIONS:
        raise ShapeError(f"{op}: activation must be one of {ACTIVATIONS}, got {activation!r}")
    return activation == "relu"


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "batch_norm_train"
    _check_activation(attrs, op)
    names = _param_names(attrs)
    if len(inputs) != 1 + len(names):
        raise ShapeError(f"{op} expects inputs x{''.join(', ' + n for n in names)}; got {len(inputs)} inputs")
    require_floating(inputs, op)
    same_dtype(inputs, op)
    check_epsilon(attrs.get("epsilon"), op)
    x = inputs[0]
    _, channels = _axis_and_channels(x, attrs, op)
    _check_params(inputs[1:], names, channels, op)
    stat = BlobSpec((channels,), x.dtype)
    return [x, stat, stat]


def _grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "batch_norm_train_grad"
    relu = _check_activation(attrs, op)
    names = ["mean", "variance"] + (["gamma"] if attrs.get("with_scale") else [])
    tail = ["y", "dy"] if relu else ["dy"]  # with the ReLU: its output y (the mask) and the gradient reaching it
    if len(inputs) != 1 + len(names) + len(tail):
        raise ShapeError(f"{op} expects x, {', '.join(names + tail)}; got {len(inputs)} inputs")
    require_floating(inputs, op)
    same_dtype(inputs, op)
    check_epsilon(attrs.get("epsilon"), op)
    x = inputs[0]
    for name, spec in zip(tail, inputs[-len(tail):]):
        if spec.shape != x.shape:
            raise ShapeError(f"{op}: {name} {spec.shape} must be shaped like x {x.shape}")
    _, channels = _axis_and_channels(x, attrs, op)
    _check_params(inputs[1:1 + len(names)], names, channels, op)
    stat = BlobSpec((channels,), x.dtype)
    # dx, and dgamma / dbeta for the parameters the forward op had
    return [x] + [stat] * len(_param_names(attrs))


def _settings(ctx: KernelContext) -> tuple[Any, np.dtype, np.dtype, tuple[int, int, int], float, bool, bool, bool]:
    """What both kernels read from their node: xp, x's dtype, the accumulation dtype, x's shape seen as
    (outer, channels, inner), epsilon and the three flags."""
    x_spec = ctx.inputs[0]
    axis = normalize_axis(ctx.attrs["axis"], len(x_spec.shape))
    shape = (math.prod(x_spec.shape[:axis]), x_spec.shape[axis], math.prod(x_spec.shape[axis + 1:]))
    # sums accumulate in float64: a reduction over the strided outer axis (channels last) adds one value at a
    # time, and float32 lost 1e-3 of a gradient there; the products stay in x's dtype (float16: float32)
    acc = np.dtype(np.float64)
    return (ctx.xp, x_spec.dtype, acc, shape, float(ctx.attrs["epsilon"]), bool(ctx.attrs.get("with_scale")),
            bool(ctx.attrs.get("with_offset")), ctx.attrs.get("activation") == "relu")


def _kernel(ctx: KernelContext) -> Any:
    xp, dtype, acc, shape, eps, with_scale, with_offset, relu = _settings(ctx)
    y, mean, variance = ctx.out(0), ctx.out(1), ctx.out(2)
    inv_n = 1.0 / (shape[0] * shape[2])
    per_channel = (1, shape[1], 1)  # a (channels,) vector broadcast over the (outer, channels, inner) view

    def run(x: Any, *params: Any) -> tuple[Any, Any, Any]:
        x3, y3 = x.reshape(shape), y.reshape(shape)
        mean[...] = xp.sum(x3, axis=(0, 2), dtype=acc) * inv_n
        xp.subtract(x3, mean.reshape(per_channel), out=y3)  # y holds x - mean for now
        centred = y3 if dtype.itemsize >= 4 else y3.astype(np.float32)
        variance[...] = xp.sum(centred * centred, axis=(0, 2), dtype=acc) * inv_n
        scale = 1.0 / xp.sqrt(variance.astype(acc) + eps)
        if with_scale:
            scale = scale * params[0]
        xp.multiply(y3, scale.astype(dtype).reshape(per_channel), out=y3)
        if with_offset:
            xp.add(y3, params[-1].reshape(per_channel), out=y3)
        if relu:
            xp.maximum(y3, 0, out=y3)
        return y, mean, variance

    return run


def _grad_kernel(ctx: KernelContext) -> Any:
    xp, dtype, acc, shape, eps, with_scale, with_offset, relu = _settings(ctx)
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    inv_n = 1.0 / (shape[0] * shape[2])
    per_channel = (1, shape[1], 1)

    def run(x: Any, mean: Any, variance: Any, *rest: Any) -> Any:
        dx3 = outs[0].reshape(shape)
        dy3 = rest[-1].reshape(shape)
        if relu:  # the gradient reaching the normalization: dy where the ReLU's output is positive
            xp.multiply(dy3, rest[-2].reshape(shape) > 0, out=dx3)
            dy3 = dx3
        centred = xp.subtract(x.reshape(shape), mean.reshape(per_channel))
        wide_dy, wide_centred = ((dy3, centred) if dtype.itemsize >= 4
                                 else (dy3.astype(np.float32), centred.astype(np.float32)))
        sum_dy_centred = xp.sum(wide_dy * wide_centred, axis=(0, 2), dtype=acc)
        sum_dy = xp.sum(wide_dy, axis=(0, 2), dtype=acc)
        inv_sigma = 1.0 / xp.sqrt(variance.astype(acc) + eps)
        if with_scale:
            outs[1][...] = sum_dy_centred * inv_sigma           # dgamma = sum(dy * xhat)
        if with_offset:
            outs[-1][...] = sum_dy                              # dbeta = sum(dy)
        gain = (inv_sigma * rest[0] if with_scale else inv_sigma).astype(dtype).reshape(per_channel)
        along = (-inv_sigma * inv_sigma * sum_dy_centred * inv_n).astype(dtype).reshape(per_channel)
        mean_dy = (sum_dy * inv_n).astype(dtype).reshape(per_channel)
        # dx = gain * (dy - mean(dy) - (x - mean) * inv_sigma^2 * mean(dy * (x - mean)))
        xp.multiply(centred, along, out=centred)
        xp.add(centred, dy3, out=dx3)
        xp.subtract(dx3, mean_dy, out=dx3)
        xp.multiply(dx3, gain, out=dx3)
        return tuple(outs) if len(outs) > 1 else outs[0]

    return run


def _grad(ctx: GradContext) -> list[Any]:
    attrs = ctx.attrs
    dy, dmean, dvariance = ctx.out_grads
    grads: list[Any] = [None] * len(ctx.inputs)
    x, mean, variance = ctx.inputs[0], ctx.outputs[1], ctx.outputs[2]
    if dy is not None and attrs.get("activation") == "relu":
        dy = ctx.apply("relu_grad", [ctx.outputs[0], dy])
        attrs = {**attrs, "activation": None}
    if dy is not None:
        saved = [x, mean, variance] + ([ctx.inputs[1]] if attrs.get("with_scale") else [])
        outs = ctx.apply("batch_norm_train_grad", saved + [dy], {**attrs, "forward": ctx.node.name})
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        grads = outs + [None] * (len(ctx.inputs) - len(outs))
    if dmean is not None or dvariance is not None:
        # a gradient reaching the statistics themselves: moments' own rule, added to the one through y
        rank = len(x.shape)
        axis = normalize_axis(attrs["axis"], rank)
        reduce_axes = tuple(i for i in range(rank) if i != axis)
        stat_grads = [g for g in (dmean, dvariance) if g is not None]
        through_stats = ctx.apply("moments_grad", [x, mean] + stat_grads,
                                  {"axes": reduce_axes, "keepdims": False, "with_mean": dmean is not None,
                                   "with_variance": dvariance is not None})
        grads[0] = through_stats if grads[0] is None else ctx.apply("add_n", [grads[0], through_stats])
    return grads


BATCH_NORM_TRAIN = OpDef(
    "batch_norm_train", _infer, kernel=_kernel, grad=_grad,
    doc="train-mode batch normalization over every axis but `axis`: (y, batch mean, biased batch variance), "
        "y = (x - mean) / sqrt(variance + epsilon) * gamma + beta with gamma, beta of shape (channels,), then "
        "max(y, 0) with activation='relu' (the fusion pass folds a following relu in)",
    compute=Compute(layouts=layout_rules.batch_norm_train, amp="gray"),
    legacy=LegacyFace(output_names=("y", "mean", "variance")))
BATCH_NORM_TRAIN_GRAD = OpDef(
    "batch_norm_train_grad", _grad_infer, kernel=_grad_kernel, not_differentiable=True,
    doc="(dx[, dgamma][, dbeta]) of batch_norm_train through its batch statistics, from x, mean, variance, "
        "gamma and dy (with activation='relu': x, mean, variance, gamma, the ReLU's output and the gradient "
        "reaching it)", compute=Compute(layouts=layout_rules.batch_norm_train_grad))

OPS = (BATCH_NORM_TRAIN, BATCH_NORM_TRAIN_GRAD)
