"""``flow.nn``: activations, softmax, dropout, convolution, pooling and losses (legacy arguments)."""
from __future__ import annotations

import math
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.defs.common import build_error, op_name
from flowjob_ops.kernels import padding as pads

__all__ = [
    "avg_pool2d", "bias_add", "conv2d", "dropout", "gelu", "log_softmax", "max_pool2d", "relu", "sigmoid",
    "sigmoid_cross_entropy_with_logits", "softmax", "softmax_cross_entropy_with_logits",
    "sparse_softmax_cross_entropy_with_logits", "tanh",
    # legacy activations (v0.4 flow.nn)
    "elu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsoftmax", "mish", "relu6", "selu", "swish",
    # normalization (v0.4 flow.nn)
    "batch_normalization", "moments",
]

IntOrPair = int | Sequence[int]


def relu(x: Blob, name: str | None = None) -> Blob:
    """max(x, 0), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Relu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("relu", [x], name=name)


def sigmoid(x: Blob, name: str | None = None) -> Blob:
    """1 / (1 + exp(-x)), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Sigmoid_<n>``.

    Returns:
        A blob like x.
    """
    return apply("sigmoid", [x], name=name)


def tanh(x: Blob, name: str | None = None) -> Blob:
    """tanh(x), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Tanh_<n>``.

    Returns:
        A blob like x.
    """
    return apply("tanh", [x], name=name)


def gelu(x: Blob, name: str | None = None) -> Blob:
    """x * Phi(x) = x/2 (1 + erf(x / sqrt(2))): the exact erf form, not the tanh approximation.

    Args:
        x: a floating blob.
        name: the op name; default ``Gelu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("gelu", [x], name=name)


def leaky_relu(x: Blob, alpha: float = 0.2, name: str | None = None) -> Blob:
    """x where x > 0, ``alpha * x`` elsewhere.

    Args:
        x: a floating blob.
        alpha: the slope below zero.
        name: the op name; default ``LeakyRelu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("leaky_relu", [x], {"alpha": alpha}, name=name)


def hardtanh(x: Blob, min_val: float = -1.0, max_val: float = 1.0, name: str | None = None) -> Blob:
    """x clipped to ``[min_val, max_val]``; the gradient passes strictly inside.

    Args:
        x: a floating blob.
        min_val: the lower bound.
        max_val: the upper bound, above min_val.
        name: the op name; default ``Hardtanh_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardtanh", [x], {"min_val": min_val, "max_val": max_val}, name=name)


def relu6(x: Blob, name: str | None = None) -> Blob:
    """min(max(x, 0), 6).

    Args:
        x: a floating blob.
        name: the op name; default ``Relu6_<n>``.

    Returns:
        A blob like x.
    """
    return apply("relu6", [x], name=name)


def hardsigmoid(x: Blob, name: str | None = None) -> Blob:
    """relu6(x + 3) / 6, a piecewise-linear sigmoid.

    Args:
        x: a floating blob.
        name: the op name; default ``HardSigmoid_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardsigmoid", [x], name=name)


def hardswish(x: Blob, name: str | None = None) -> Blob:
    """x * relu6(x + 3) / 6.

    Args:
        x: a floating blob.
        name: the op name; default ``HardSwish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardswish", [x], name=name)


def elu(x: Blob, alpha: float = 1.0, name: str | None = None) -> Blob:
    """x where x > 0, ``alpha * (exp(x) - 1)`` elsewhere.

    Args:
        x: a floating blob.
        alpha: the saturation value below zero.
        name: the op name; default ``Elu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("elu", [x], {"alpha": alpha, "scale": 1.0}, name=name)


def selu(x: Blob, scale: float = 1.0507009873554805, alpha: float = 1.6732632423543772,
         name: str | None = None) -> Blob:
    """``scale * elu(x, alpha)``; the defaults are the self-normalising constants.

    Args:
        x: a floating blob.
        scale: the factor on both branches.
        alpha: the saturation value of the elu below zero.
        name: the op name; default ``Selu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("selu", [x], {"alpha": alpha, "scale": scale}, name=name)


def mish(x: Blob, name: str | None = None) -> Blob:
    """x * tanh(softplus(x)), softplus(x) = log(1 + exp(x)).

    Args:
        x: a floating blob.
        name: the op name; default ``Mish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("mish", [x], name=name)


def swish(x: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """x * sigmoid(beta * x) (SiLU when beta = 1); the op type is ``silu``.

    Args:
        x: a floating blob.
        beta: the factor inside the sigmoid.
        name: the op name; default ``Swish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("silu", [x], {"beta": beta}, name=name)


def softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """exp(logits) / sum(exp(logits)) along ``axis``.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``Softmax_<n>``.

    Returns:
        A blob like logits.
    """
    return apply("softmax", [logits], {"axis": -1 if axis is None else axis}, name=name)


def log_softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """logits - log(sum(exp(logits))) along ``axis``, computed stably.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``LogSoftmax_<n>``.

    Returns:
        A blob like logits.
    """
    return apply("log_softmax", [logits], {"axis": -1 if axis is None else axis}, name=name)


def logsoftmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """The legacy spelling of ``log_softmax``: logits - log(sum(exp(logits))) along ``axis``.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``LogSoftmax_<n>``.

    Returns:
        A blob like logits.
    """
    return log_softmax(logits, axis, name)


def dropout(x: Blob, rate: float, noise_shape: Sequence[int] | None = None, seed: int | None = None,
            name: str | None = None) -> Blob:
    """Zeroes each element with probability ``rate`` and scales the rest by 1/(1-rate); identity in predict jobs.

    A new mask is drawn at every step of a train job, and the gradient uses that same mask.

    Args:
        x: a floating blob.
        rate: the drop probability, in [0, 1).
        noise_shape: the mask's shape, broadcast over x (default x's shape).
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``Dropout_<n>``.

    Returns:
        A blob like x.
    """
    attrs = {"rate": rate, "noise_shape": None if noise_shape is None else tuple(noise_shape), "seed": seed}
    y, _mask = apply("dropout", [x], attrs, name=name)
    return y


def _spatial(value: Any, data_format: str, what: str) -> Any:
    """Legacy 4-entry ksize/strides/dilations (one per axis of data_format) to their (h, w) pair."""
    if isinstance(value, (list, tuple)) and len(value) == 4:
        try:
            fmt = pads.check_data_format(data_format)
        except ValueError as exc:
            raise build_error("flow.nn", str(exc)) from None
        ah, aw = pads.SPATIAL_AXES[fmt]
        others = [value[i] for i in range(4) if i not in (ah, aw)]
        if any(v != 1 for v in others):
            raise build_error("flow.nn", f"{what} {tuple(value)}: the batch and channel entries must be 1 for {fmt}")
        return (value[ah], value[aw])
    return value


def _ceil_padding(x: Blob, ksize: Any, strides: Any, padding: Any, data_format: str) -> Any:
    """Explicit pads that make the output size round up (``ceil_mode``), as PyTorch and legacy v0.3 did."""
    fmt = pads.check_data_format(data_format)
    ah, aw = pads.SPATIAL_AXES[fmt]
    in_hw = (x.shape[ah], x.shape[aw])
    resolved, _ = pads.resolve_padding(padding, in_hw, ksize, strides, 1, fmt)
    kernel, stride = pads.normalize_pair(ksize, "ksize"), pads.normalize_pair(strides, "strides")
    grown = []
    for size, k, s, (before, after) in zip(in_hw, kernel, stride, resolved):
        out = math.ceil((size + before + after - k) / s) + 1
        if (out - 1) * s >= size + before:  # the last window must start inside the input or its left pad
            out -= 1
        grown.append((before, max(after, (out - 1) * s + k - size - before)))
    return tuple(grown)


def _pool(op: str, input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any,  # noqa: A002
          data_format: str, name: str | None, ceil_mode: bool) -> Blob:
    ksize, strides = _spatial(ksize, data_format, "ksize"), _spatial(strides, data_format, "strides")
    if ceil_mode and isinstance(input, Blob) and len(input.shape) == 4:
        try:
            padding = _ceil_padding(input, ksize, strides, padding, data_format)
        except ValueError as exc:  # the op's inference would say the same, naming the op
            raise build_error(f"flow.nn.{op}", str(exc)) from None
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": data_format}
    return apply(op, [input], attrs, name=name)


def max_pool2d(input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
               name: str | None = None, *, ceil_mode: bool = False) -> Blob:
    """Max over each ksize window (padding never wins; each window's gradient goes to its first maximum).

    Args:
        input: a 4-d floating blob in ``data_format``.
        ksize: the window, an int, (h, w) or 4 per-axis entries.
        strides: the step, an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``MaxPool2D_<n>``.
        ceil_mode: round the output size up instead of down.

    Returns:
        The pooled blob.
    """
    return _pool("max_pool2d", input, ksize, strides, padding, data_format, name, ceil_mode)


def avg_pool2d(input: Blob, ksize: IntOrPair, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
               name: str | None = None, *, ceil_mode: bool = False) -> Blob:
    """Mean over each ksize window's real elements (padding is left out of the count).

    Args:
        input: a 4-d floating blob in ``data_format``.
        ksize: the window, an int, (h, w) or 4 per-axis entries.
        strides: the step, an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``AvgPool2D_<n>``.
        ceil_mode: round the output size up instead of down.

    Returns:
        The pooled blob.
    """
    return _pool("avg_pool2d", input, ksize, strides, padding, data_format, name, ceil_mode)


def conv2d(input: Blob, filters: Blob, strides: IntOrPair, padding: Any, data_format: str = "NCHW",  # noqa: A002
           dilations: IntOrPair | None = None, groups: int = 1, name: str | None = None) -> Blob:
    """2-D convolution (cross-correlation, as in every framework).

    Args:
        input: a 4-d floating blob, (N, C, H, W) or (N, H, W, C).
        filters: the weight, (F, C/groups, kh, kw) for NCHW or (F, kh, kw, C/groups) for NHWC.
        strides: an int, (h, w) or 4 per-axis entries.
        padding: "SAME", "VALID", "SAME_LOWER"/"SAME_UPPER" or explicit pads.
        data_format: "NCHW" or "NHWC".
        dilations: an int, (h, w) or 4 per-axis entries; default 1.
        groups: the number of channel groups.
        name: the op name; default ``Conv2D_<n>``.

    Returns:
        The output blob, (N, F, OH, OW) or (N, OH, OW, F).
    """
    attrs = {"strides": _spatial(strides, data_format, "strides"), "padding": padding, "data_format": data_format,
             "dilations": None if dilations is None else _spatial(dilations, data_format, "dilations"),
             "groups": groups}
    return apply("conv2d", [input, filters], attrs, name=name)


def bias_add(value: Blob, bias: Blob, data_format: str | None = None, name: str | None = None) -> Blob:
    """``value + bias`` along the channel axis.

    Args:
        value: a blob of rank >= 1.
        bias: a 1-d blob with one entry per channel.
        data_format: None or "NC..." (channels at axis 1, the legacy default) or "N...C" (the last axis).
        name: the op name; default ``BiasAdd_<n>``.

    Returns:
        A blob like value.
    """
    return apply("bias_add", [value, bias], {"data_format": data_format}, name=name)


def sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample -log softmax(logits)[label].

    Args:
        labels: integer class indices shaped like logits without its last axis (a trailing axis of size 1 is
            dropped); negative labels count from the end, as numpy indices do.
        logits: a floating blob (..., classes).
        name: the op name; default ``SparseSoftmaxCrossEntropy_<n>``.

    Returns:
        The loss, shaped like labels (N,) and not reduced.
    """
    node = op_name(name, "SparseSoftmaxCrossEntropy")
    if isinstance(labels, Blob) and isinstance(logits, Blob) and len(labels.shape) == len(logits.shape) \
            and labels.shape and labels.shape[-1] == 1:
        labels = apply("reshape", [labels], {"shape": labels.shape[:-1]}, name=f"{node}_labels")
    loss, _prob = apply("sparse_softmax_cross_entropy", [labels, logits], name=node)
    return loss


def softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample -sum(labels * log softmax(logits)) over the last axis.

    Args:
        labels: a probability distribution per sample, shaped like logits.
        logits: a floating blob (..., classes).
        name: the op name; default ``SoftmaxCrossEntropy_<n>``.

    Returns:
        The loss, shaped like logits without the last axis.
    """
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


def moments(x: Blob, axes: Sequence[int], keepdims: bool = False, name: str | None = None) -> tuple[Blob, Blob]:
    """The mean and the (biased, divide-by-n) variance of x over ``axes``, as legacy did.

    Args:
        x: a floating blob.
        axes: a list of the axes to reduce (negative counts from the end).
        keepdims: keep the reduced axes with extent 1.
        name: the op name; default ``Moments_<n>``.

    Returns:
        (mean, variance), both shaped like x without (or with extent 1 on) ``axes``.
    """
    if isinstance(axes, int) or not isinstance(axes, (list, tuple)):
        raise build_error("flow.nn.moments", f"axes must be a list of ints, got {axes!r}")
    if not isinstance(keepdims, bool):
        raise build_error("flow.nn.moments", f"keepdims must be a bool, got {keepdims!r}")
    mean, variance = apply("moments", [x], {"axes": tuple(axes), "keepdims": keepdims}, name=name)
    return mean, variance


def _as_nd_param(p: Blob, x: Blob, axis: int, what: str, name: str) -> Blob:
    """A 1-D parameter (x.shape[axis],) reshaped to broadcast along ``axis``; one of x's rank kept."""
    if not isinstance(p, Blob):
        raise TypeError(f"flow.nn.batch_normalization: {what} must be a blob, got {type(p).__name__}")
    rank = len(x.shape)
    if len(p.shape) == rank:
        return p
    if p.shape != (x.shape[axis],):
        raise build_error("flow.nn.batch_normalization",
                          f"{what} must be 1-D of length x.shape[{axis}] = {x.shape[axis]} or have x's rank "
                          f"{rank}, got shape {p.shape}")
    nd = tuple(x.shape[axis] if i == axis else 1 for i in range(rank))
    return apply("reshape", [p], {"shape": nd}, name=f"{name}-{what}_reshape")


def batch_normalization(x: Blob, mean: Blob, variance: Blob, offset: Blob | None = None,
                        scale: Blob | None = None, variance_epsilon: float | None = 1e-5, axis: int = 1,
                        name: str | None = None) -> Blob:
    """(x - mean) / sqrt(variance + variance_epsilon) * scale + offset, with the statistics given.

    Args:
        x: a floating blob.
        mean: 1-D of length x.shape[axis] (broadcast along ``axis``), or of x's rank broadcasting to x
            (the ``keepdims`` output of ``moments``).
        variance: like mean.
        offset: like mean, or None (no offset).
        scale: like mean, or None (no scale).
        variance_epsilon: added to the variance before the square root.
        axis: the axis 1-D parameters run along; legacy's default 1 suits NCHW.
        name: the op name; default ``BatchNorm_<n>``.

    Returns:
        A blob like x. Its gradient reaches x, mean, variance, scale and offset.
    """
    if not isinstance(x, Blob):
        raise TypeError(f"flow.nn.batch_normalization: x must be a blob, got {type(x).__name__}")
    rank = len(x.shape)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
        raise build_error("flow.nn.batch_normalization", f"axis must be an int in [{-rank}, {rank}), got {axis!r}")
    axis %= rank
    eps = 1e-5 if variance_epsilon is None else variance_epsilon
    prefix = op_name(name, "BatchNorm")
    inputs = [x] + [_as_nd_param(p, x, axis, what, prefix) for p, what in ((mean, "mean"), (variance, "variance"))]
    if scale is not None:
        inputs.append(_as_nd_param(scale, x, axis, "scale", prefix))
    if offset is not None:
        inputs.append(_as_nd_param(offset, x, axis, "offset", prefix))
    attrs = {"epsilon": eps, "with_scale": scale is not None, "with_offset": offset is not None}
    return apply("batch_norm", inputs, attrs, name=prefix)
