"""``flow.nn``: activations, softmax, dropout, convolution, pooling and losses (legacy arguments)."""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name
from flowjob_ops.sorting_ops import fused_scale_tril, tril  # legacy exported both as flow.math.* and flow.nn.*
from flowjob_ops.kernels import padding as pads

__all__ = [
    "avg_pool2d", "bias_add", "conv2d", "dropout", "gelu", "log_softmax", "max_pool2d", "relu", "sigmoid",
    "sigmoid_cross_entropy_with_logits", "softmax", "softmax_cross_entropy_with_logits",
    "sparse_softmax_cross_entropy_with_logits", "tanh",
    "sparse_cross_entropy",
    # legacy activations (v0.4 flow.nn)
    "elu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsoftmax", "mish", "relu6", "selu", "swish",
    # normalization (v0.4 flow.nn)
    "batch_normalization", "moments",
    # 1-d convolution and pooling, transposed and TF-style convolution (v0.4 flow.nn)
    "avg_pool1d", "compat_conv2d", "conv1d", "conv2d_transpose", "max_pool1d", "torch_conv2d_transpose",
    # leftovers of v0.4 flow.nn: layer_norm, the random keep mask, and legacy's nn aliases of flow.math's triangles
    "fused_scale_tril", "layer_norm", "random_mask_like", "tril",
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
            dropped); a label outside [0, classes) adds zero loss and zero gradient and is warned about
            once (legacy's split-class semantics).
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


def sparse_cross_entropy(labels: Blob, prediction: Blob, name: str | None = None) -> Blob:
    """Per-sample -log(prediction[label]) of probabilities (apply softmax first; the clamp at 1e-20 keeps
    a zero probability finite, as legacy's).

    Args:
        labels: integer class indices (int32 or int64) shaped like prediction without its last axis (a
            trailing axis of size 1 is dropped); one outside [0, classes) adds zero loss and zero gradient.
        prediction: class probabilities, a floating blob (..., classes).
        name: the op name; default ``SparseCrossEntropy_<n>``.

    Returns:
        The loss, shaped like labels and not reduced.
    """
    node = op_name(name, "SparseCrossEntropy")
    if isinstance(labels, Blob) and isinstance(prediction, Blob) and len(labels.shape) == len(prediction.shape) \
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


# 1-d convolution and pooling, transposed and TF-style 2-d convolution (legacy v0.4) -----------
# The 1-d functions run the 2-d records on a height of 1: (N, C, W) -> (N, C, 1, W) for NCW and
# (N, W, C) -> (N, 1, W, C) for NWC, so their gradients are the 2-d ones through the reshapes.
_FORMATS_1D = {"NCW": "NCHW", "NWC": "NHWC"}


def _format_1d(what: str, data_format: Any) -> str:
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in _FORMATS_1D:
        raise build_error(what, f"data_format must be 'NCW' or 'NWC', got {data_format!r}")
    return fmt


def _one_int(what: str, arg: str, value: Any, fmt: str) -> int:
    """An int, a 1-list, or (pool functions) 3 per-axis entries whose batch and channel entries are 1."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(items) == 3:
        w_axis = fmt.index("W")
        if any(items[i] != 1 for i in range(3) if i != w_axis):
            raise build_error(what, f"{arg} {tuple(items)}: the batch and channel entries must be 1 for {fmt}")
        items = [items[w_axis]]
    if len(items) != 1 or isinstance(items[0], bool) or not isinstance(items[0], int) or items[0] < 1:
        raise build_error(what, f"{arg} must be a positive int or a list of one, got {value!r}")
    return items[0]


def _padding_1d(what: str, padding: Any, fmt: str) -> Any:
    """The 2-d padding of a 1-d one. Legacy conv1d and pooling read "SAME" as "SAME_LOWER" (the
    odd pixel before); explicit pads are 3 entries (int or (before, after)) in ``fmt`` order."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "SAME_LOWER", "SAME_UPPER", "VALID"):
            raise build_error(what, f"padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID' or 3 "
                                    f"(before, after) pairs, got {padding!r}")
        return "SAME_LOWER" if mode == "SAME" else mode
    if not isinstance(padding, (list, tuple)) or len(padding) != 3:
        raise build_error(what, f"padding must be a string or 3 (before, after) pairs in {fmt} order, got "
                                f"{padding!r}")
    pairs = []
    for entry in padding:
        pair = (entry, entry) if isinstance(entry, int) else tuple(entry) if isinstance(entry, (list, tuple)) else ()
        if len(pair) != 2 or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pair):
            raise build_error(what, f"padding entries must be ints or (before, after) pairs, got {entry!r}")
        pairs.append(pair)
    w_axis = fmt.index("W")
    if any(pairs[i] != (0, 0) for i in range(3) if i != w_axis):
        raise build_error(what, f"padding {padding!r}: only the W dimension may be padded for {fmt}")
    return ((0, 0), pairs[w_axis])


def _to_2d(what: str, x: Any, arg: str, fmt: str, name: str) -> Blob:
    """A 3-d blob in ``fmt`` with a height axis of 1 inserted (input or filter)."""
    if not isinstance(x, Blob):
        raise build_error(what, f"{arg} must be a blob, got {type(x).__name__}")
    if len(x.shape) != 3:
        raise build_error(what, f"{arg} must be 3-d ({fmt}), got shape {x.shape}")
    a, b, c = x.shape
    shape = (a, b, 1, c) if fmt == "NCW" else (a, 1, b, c)
    return apply("reshape", [x], {"shape": shape}, name=name)


def _from_2d(y: Blob, fmt: str, name: str) -> Blob:
    n, a, b, c = y.shape
    return apply("reshape", [y], {"shape": (n, a, c) if fmt == "NCW" else (n, b, c)}, name=name)


def conv1d(input: Blob, filters: Blob, strides: int | Sequence[int], padding: Any,  # noqa: A002
           data_format: str = "NCW", dilations: int | Sequence[int] | None = None, groups: int = 1,
           name: str | None = None) -> Blob:
    """1-D convolution: ``conv2d`` over a height of 1.

    Nodes: ``<P>_reshape_in`` and ``<P>_reshape_weight`` (a height axis of 1), the ``conv2d``
    node ``P`` and ``<P>_reshape_out``; P is ``name`` or ``Conv1d_<n>``.

    Args:
        input: a 3-d floating blob, (N, C, W) for NCW or (N, W, C) for NWC.
        filters: the weight, (F, C/groups, k) for NCW or (F, k, C/groups) for NWC.
        strides: an int or a list of one.
        padding: "SAME" (= "SAME_LOWER" as legacy: the odd pixel before), "SAME_LOWER",
            "SAME_UPPER", "VALID", or 3 entries (int or (before, after)) in data_format order.
        data_format: "NCW" or "NWC".
        dilations: an int or a list of one; default 1.
        groups: the number of channel groups.
        name: the prefix P.

    Returns:
        The output blob, (N, F, OW) or (N, OW, F).
    """
    what = "flow.nn.conv1d"
    fmt = _format_1d(what, data_format)
    stride = _one_int(what, "strides", strides, fmt)
    dilation = 1 if dilations is None else _one_int(what, "dilations", dilations, fmt)
    pad = _padding_1d(what, padding, fmt)
    node = op_name(name, "Conv1d")
    x = _to_2d(what, input, "input", fmt, f"{node}_reshape_in")
    w = _to_2d(what, filters, "filters", fmt, f"{node}_reshape_weight")
    attrs = {"strides": (1, stride), "padding": pad, "data_format": _FORMATS_1D[fmt], "dilations": (1, dilation),
             "groups": groups}
    return _from_2d(apply("conv2d", [x, w], attrs, name=node), fmt, f"{node}_reshape_out")


def _pool1d(op: str, prefix: str, input: Blob, ksize: Any, strides: Any, padding: Any,  # noqa: A002
            data_format: str, name: str | None) -> Blob:
    what = f"flow.nn.{op.replace('2d', '1d')}"
    fmt = _format_1d(what, data_format)
    k, s = _one_int(what, "ksize", ksize, fmt), _one_int(what, "strides", strides, fmt)
    pad = _padding_1d(what, padding, fmt)
    node = op_name(name, prefix)
    x = _to_2d(what, input, "input", fmt, f"{node}_reshape_in")
    attrs = {"ksize": (1, k), "strides": (1, s), "padding": pad, "data_format": _FORMATS_1D[fmt]}
    return _from_2d(apply(op, [x], attrs, name=node), fmt, f"{node}_reshape_out")


def max_pool1d(input: Blob, ksize: int | Sequence[int], strides: int | Sequence[int], padding: Any,  # noqa: A002
               data_format: str = "NWC", name: str | None = None) -> Blob:
    """1-D max pooling: ``max_pool2d`` over a height of 1 (legacy v0.4 declared it, raising
    NotImplementedError; its arguments and the NWC default are kept).

    Args:
        input: a 3-d floating blob in data_format.
        ksize: the window: an int, a list of one, or 3 per-axis entries.
        strides: the step: an int, a list of one, or 3 per-axis entries.
        padding: "SAME" (= "SAME_LOWER", legacy pooling), "SAME_LOWER", "SAME_UPPER", "VALID" or
            3 (before, after) entries in data_format order.
        data_format: "NWC" or "NCW".
        name: the prefix P: nodes ``<P>_reshape_in``, the pooling ``P``, ``<P>_reshape_out``;
            default ``MaxPool1D_<n>``.

    Returns:
        The pooled blob.
    """
    return _pool1d("max_pool2d", "MaxPool1D", input, ksize, strides, padding, data_format, name)


def avg_pool1d(input: Blob, ksize: int | Sequence[int], strides: int | Sequence[int], padding: Any,  # noqa: A002
               data_format: str = "NCW", name: str | None = None) -> Blob:
    """1-D average pooling over each window's real elements: ``avg_pool2d`` over a height of 1
    (legacy v0.4 declared it with the NCW default, raising NotImplementedError).

    Args:
        input: a 3-d floating blob in data_format.
        ksize: the window: an int, a list of one, or 3 per-axis entries.
        strides: the step: an int, a list of one, or 3 per-axis entries.
        padding: "SAME" (= "SAME_LOWER", legacy pooling), "SAME_LOWER", "SAME_UPPER", "VALID" or
            3 (before, after) entries in data_format order.
        data_format: "NCW" or "NWC".
        name: the prefix P: nodes ``<P>_reshape_in``, the pooling ``P``, ``<P>_reshape_out``;
            default ``AvgPool1D_<n>``.

    Returns:
        The pooled blob.
    """
    return _pool1d("avg_pool2d", "AvgPool1D", input, ksize, strides, padding, data_format, name)


def conv2d_transpose(value: Blob | None = None, filter: Blob | None = None,  # noqa: A002
                     output_shape: Sequence[int] | None = None, strides: IntOrPair | None = None,
                     padding: str = "VALID", data_format: str = "NCHW", name: str | None = None,
                     input: Blob | None = None, filters: Blob | None = None,  # noqa: A002
                     dilations: IntOrPair | None = None) -> Blob:
    """2-D transposed convolution (op ``deconv2d``): the data gradient of the convolution that
    maps ``output_shape`` to value's shape.

    Args:
        value: a 4-d floating blob (N, F, H, W) or (N, H, W, F); ``input`` is its alias (give one).
        filter: the weight, (F, C, kh, kw) for NCHW or (F, kh, kw, C) for NHWC, C being the output
            channels; ``filters`` is its alias (give one).
        output_shape: the output's 4 dimensions in data_format order (batch and channels must
            match value and filter).
        strides: an int, (h, w) or 4 per-axis entries (required).
        padding: "VALID" (output rows no window reaches are 0) or "SAME" (needs
            ceil(output / stride) == value's size; the odd padding pixel goes after).
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``Deconv2d_<n>``.
        input: alias of value.
        filters: alias of filter.
        dilations: an int, (h, w) or 4 per-axis entries; default 1.

    Returns:
        A blob of output_shape.
    """
    what = "flow.nn.conv2d_transpose"
    if (value is None) == (input is None):
        raise build_error(what, "give exactly one of value and input")
    if (filter is None) == (filters is None):
        raise build_error(what, "give exactly one of filter and filters")
    x = value if value is not None else input
    w = filter if filter is not None else filters
    if not isinstance(x, Blob) or not isinstance(w, Blob):
        raise build_error(what, "value and filter must be blobs")
    if data_format not in ("NCHW", "NHWC"):
        raise build_error(what, f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise build_error(what, f"value and filter must be 4-d, got shapes {x.shape} and {w.shape}")
    if not isinstance(output_shape, (list, tuple)) or len(output_shape) != 4:
        raise build_error(what, f"output_shape must be 4 dimensions in {data_format} order, got {output_shape!r}")
    out = tuple(int(d) for d in output_shape)
    channels_axis = 1 if data_format == "NCHW" else 3
    if out[0] != x.shape[0]:
        raise build_error(what, f"output_shape {out}: batch must be value's ({x.shape[0]})")
    if out[channels_axis] != w.shape[channels_axis]:
        # v0.2 took the channels from the filter and ignored this entry (v0.3.1+ asserted); programs of
        # that time still in the v0.4 benchmark (DCGAN's layers.py passes value's channels) keep running
        warnings.warn(f"{what}: output_shape {out} gives {out[channels_axis]} channels, the filter has "
                      f"{w.shape[channels_axis]}; the filter's are used, as legacy v0.2 did", stacklevel=2)
        out = out[:channels_axis] + (int(w.shape[channels_axis]),) + out[channels_axis + 1:]
    if strides is None:
        raise build_error(what, "strides must be an int or a list")
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise build_error(what, f"padding must be 'SAME' or 'VALID', got {padding!r}")
    # legacy's SAME transposed convolution crops padding_needed // 2 before: SAME_UPPER
    attrs = {"strides": _spatial(strides, data_format, "strides"),
             "padding": "VALID" if padding.upper() == "VALID" else "SAME_UPPER", "data_format": data_format,
             "dilations": None if dilations is None else _spatial(dilations, data_format, "dilations"),
             "groups": 1, "x_shape": out}
    return apply("deconv2d", [x, w], attrs, name=name)


def compat_conv2d(input: Blob, filters: Blob, strides: IntOrPair, padding: Any,  # noqa: A002
                  data_format: str = "NCHW", dilations: IntOrPair | None = None, groups: int = 1,
                  name: str | None = None) -> Blob:
    """``conv2d`` with TensorFlow's reading of "SAME": the odd padding pixel after ("SAME_UPPER").

    Args:
        input: a 4-d floating blob, (N, C, H, W) or (N, H, W, C).
        filters: the weight, (F, C/groups, kh, kw) for NCHW or (F, kh, kw, C/groups) for NHWC.
        strides: an int, (h, w) or 4 per-axis entries.
        padding: "SAME" or "VALID" (other conv2d paddings pass through).
        data_format: "NCHW" or "NHWC".
        dilations: an int, (h, w) or 4 per-axis entries; default 1.
        groups: the number of channel groups.
        name: the op name; default ``Conv2D_<n>``.

    Returns:
        The output blob.
    """
    if isinstance(padding, str) and padding.upper() == "SAME":
        padding = "SAME_UPPER"
    return conv2d(input, filters, strides, padding, data_format, dilations, groups, name)


def _int_pair(what: str, arg: str, value: Any) -> tuple[int, int]:
    """An int or two ints, each may be 0 (pads)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise build_error(what, f"{arg} must be an int or two ints (h, w), got {value!r}")
    return items[0], items[1]


def torch_conv2d_transpose(value: Blob | None = None, filter: Blob | None = None,  # noqa: A002
                           output_padding: IntOrPair | None = None, strides: IntOrPair | None = None,
                           padding_needed: Sequence[int] | None = None, data_format: str = "NCHW",
                           name: str | None = None, input: Blob | None = None,  # noqa: A002
                           filters: Blob | None = None, dilations: IntOrPair | None = None) -> Blob:
    """PyTorch-style 2-D transposed convolution (op ``deconv2d``): the output size is
    ``(in - 1) * stride + dilation * (k - 1) + 1 - padding_needed + output_padding`` per axis, the
    padding split evenly, and the output_padding rows still take the windows that reach them.

    Args:
        value: a 4-d floating blob; ``input`` is its alias (give one).
        filter: the weight, (F, C, kh, kw) for NCHW or (F, kh, kw, C) for NHWC; ``filters`` is its alias.
        output_padding: an int or (h, w), each below its stride; default 0.
        strides: an int or (h, w) (required).
        padding_needed: the total padding (h, w), each even (torch's 2 * padding).
        data_format: "NCHW" or "NHWC".
        name: the op name; default ``Deconv2d_<n>``.
        input: alias of value.
        filters: alias of filter.
        dilations: an int or (h, w); default 1.

    Returns:
        The output blob.
    """
    what = "flow.nn.torch_conv2d_transpose"
    if (value is None) == (input is None) or (filter is None) == (filters is None):
        raise build_error(what, "give exactly one of value and input, and one of filter and filters")
    x = value if value is not None else input
    w = filter if filter is not None else filters
    if not isinstance(x, Blob) or not isinstance(w, Blob) or len(x.shape) != 4 or len(w.shape) != 4:
        raise build_error(what, "value and filter must be 4-d blobs")
    if data_format not in ("NCHW", "NHWC"):
        raise build_error(what, f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    try:
        stride = pads.normalize_pair(strides, "strides")
        dilation = pads.normalize_pair(1 if dilations is None else dilations, "dilations")
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    extra, needed = _int_pair(what, "output_padding", output_padding or 0), _int_pair(what, "padding_needed",
                                                                                        padding_needed)
    if any(p < 0 or p % 2 for p in needed):
        raise build_error(what, f"padding_needed must be even and >= 0 per axis, got {tuple(padding_needed)}")
    if any(not 0 <= e < s for e, s in zip(extra, stride)):
        raise build_error(what, f"output_padding {extra} must be >= 0 and below the strides {stride}")
    ah, aw = pads.SPATIAL_AXES[data_format]
    kernel = (w.shape[2], w.shape[3]) if data_format == "NCHW" else (w.shape[1], w.shape[2])
    sizes = [(x.shape[a] - 1) * s + (k - 1) * d + 1 - p + e
             for a, s, k, d, p, e in zip((ah, aw), stride, kernel, dilation, needed, extra)]
    out = [x.shape[0], 0, 0, 0]
    out[1 if data_format == "NCHW" else 3] = w.shape[1 if data_format == "NCHW" else 3]
    out[ah], out[aw] = sizes
    attrs = {"strides": stride, "padding": tuple((p // 2, p // 2) for p in needed), "data_format": data_format,
             "dilations": dilation, "groups": 1, "x_shape": tuple(out)}
    return apply("deconv2d", [x, w], attrs, name=name)


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
    from flowjob_ops.records.normalization import check_epsilon

    try:
        eps = check_epsilon(1e-5 if variance_epsilon is None else variance_epsilon, "flow.nn.batch_normalization",
                            "variance_epsilon")
    except ValueError as exc:
        raise build_error("flow.nn.batch_normalization", str(exc).split(": ", 1)[-1]) from None
    prefix = op_name(name, "BatchNorm")
    inputs = [x] + [_as_nd_param(p, x, axis, what, prefix) for p, what in ((mean, "mean"), (variance, "variance"))]
    if scale is not None:
        inputs.append(_as_nd_param(scale, x, axis, "scale", prefix))
    if offset is not None:
        inputs.append(_as_nd_param(offset, x, axis, "offset", prefix))
    attrs = {"epsilon": eps, "with_scale": scale is not None, "with_offset": offset is not None}
    return apply("batch_norm", inputs, attrs, name=prefix)


# leftovers of v0.4 flow.nn ----------------------------------------------------------------
def layer_norm(inputs: Blob, gamma: Blob | None = None, beta: Blob | None = None, begin_norm_axis: int = 1,
               begin_params_axis: int = -1, epsilon: float = 1e-5, name: str | None = None) -> Blob:
    """Layer normalization with parameters given: each sample normalized over the axes from
    ``begin_norm_axis`` on (mean and biased variance), then ``* gamma + beta``, as legacy v0.4.

    Args:
        inputs: a floating blob.
        gamma: the scale, ``inputs.shape[begin_params_axis:]`` (any shape of that many elements, as
            legacy reshaped it), or None.
        beta: the offset, like gamma, or None.
        begin_norm_axis: the first normalized axis (negative counts from the end).
        begin_params_axis: the first axis gamma and beta extend over; they broadcast over the earlier ones.
        epsilon: added to the variance before the square root.
        name: the op name; default ``LayerNorm_<n>``.

    Returns:
        A blob like inputs; the gradient reaches inputs, gamma and beta.
    """
    from flowjob_ops.records.normalization import check_epsilon

    what = "flow.nn.layer_norm"
    if not isinstance(inputs, Blob):
        raise TypeError(f"{what}: inputs must be a blob, got {type(inputs).__name__}")
    rank = len(inputs.shape)
    axes = {}
    for arg, value in (("begin_norm_axis", begin_norm_axis), ("begin_params_axis", begin_params_axis)):
        if isinstance(value, bool) or not isinstance(value, int) or not -rank <= value < rank:
            raise build_error(what, f"{arg} must be an int in [{-rank}, {rank}) for a rank-{rank} input, got {value!r}")
        axes[arg] = value % rank
    try:
        eps = check_epsilon(epsilon, what)
    except ValueError as exc:
        raise build_error(what, str(exc).split(": ", 1)[-1]) from None
    prefix = op_name(name, "LayerNorm")
    param_shape = tuple(inputs.shape[axes["begin_params_axis"]:])
    nd = (1,) * axes["begin_params_axis"] + param_shape
    params = []
    for arg, p in (("gamma", gamma), ("beta", beta)):
        if p is None:
            continue
        if not isinstance(p, Blob):
            raise TypeError(f"{what}: {arg} must be a blob or None, got {type(p).__name__}")
        if math.prod(p.shape) != math.prod(param_shape):
            raise build_error(what, f"{arg} must hold inputs.shape[{begin_params_axis}:] = {param_shape} "
                                    f"({math.prod(param_shape)} elements), got shape {p.shape}")
        params.append(apply("reshape", [p], {"shape": nd}, name=f"{prefix}-{arg}_reshape"))
    mean, variance = apply("moments", [inputs], {"axes": tuple(range(axes["begin_norm_axis"], rank)),
                                                 "keepdims": True}, name=f"{prefix}-moments")
    attrs = {"epsilon": eps, "with_scale": gamma is not None, "with_offset": beta is not None}
    return apply("batch_norm", [inputs, mean, variance] + params, attrs, name=prefix)


def random_mask_like(like: Blob, rate: float, seed: int | None = None, noise_shape: Sequence[int] | None = None,
                     name: str | None = None) -> Blob:
    """An int8 mask shaped like ``like``: each element 1 with probability 1 - rate, else 0 (legacy v0.4).

    A fresh mask is drawn at every step (train and predict jobs alike); only like's shape is read.

    Args:
        like: a blob of any dtype.
        rate: the probability of a 0, in [0, 1).
        seed: seeds this node's random stream, so the sequence of masks repeats (default: fresh entropy).
        noise_shape: must be None: legacy v0.4 refused any other value ("supported later").
        name: the op name; default ``RandomMaskLike_<n>``.

    Returns:
        An int8 blob of like's shape.
    """
    from flowjob_ops.records.dropout import check_rate

    what = "flow.nn.random_mask_like"
    if not isinstance(like, Blob):
        raise TypeError(f"{what}: like must be a blob, got {type(like).__name__}")
    if noise_shape is not None:
        raise build_error(what, f"noise_shape must be None (legacy v0.4 did not support it), got {noise_shape!r}")
    try:
        check_rate(rate, "rate")
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise build_error(what, f"seed must be an int or None, got {seed!r}")
    return apply("random_mask_like", [like], {"rate": float(rate), "seed": seed}, name=name)


# 3-d convolution and pooling (legacy v0.4), written in flowjob_ops.nn3d
from flowjob_ops.nn3d import avg_pool3d, conv3d, max_pool3d  # noqa: E402

__all__ += ["avg_pool3d", "conv3d", "max_pool3d"]


# legacy v0.4 leftovers (softmax_grad, the fused bias-add / tril-softmax-dropout and self-attention
# functions, distributed sparse cross entropy), written in flowjob_ops.extra_nn
from flowjob_ops.extra_nn import (  # noqa: E402
    distributed_sparse_softmax_cross_entropy_with_logits, fused_bias_add_dropout, fused_bias_add_gelu,
    fused_scale_tril_softmax_dropout, fused_self_attention_query_mul_key_and_value, softmax_grad)

__all__ += ["distributed_sparse_softmax_cross_entropy_with_logits", "fused_bias_add_dropout", "fused_bias_add_gelu",
            "fused_scale_tril_softmax_dropout", "fused_self_attention_query_mul_key_and_value", "softmax_grad"]


# legacy v0.4's lazy losses, group/instance norms and pixel shuffles (L1Loss, GroupNorm, PixelShuffle, ...),
# composed in flowjob_ops.nn_v04
from flowjob_ops.nn_v04 import (  # noqa: E402
    BCELoss, BCEWithLogitsLoss, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, KLDivLoss, L1Loss,
    MarginRankingLoss, MSELoss, PixelShuffle, PixelShufflev2, TripletMarginLoss)

__all__ += ["BCELoss", "BCEWithLogitsLoss", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
            "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss", "PixelShuffle", "PixelShufflev2",
            "TripletMarginLoss"]
