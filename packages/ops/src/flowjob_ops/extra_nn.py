"""``flow.nn`` names of legacy v0.4 left over: softmax_grad, the fused bias-add / tril-softmax-dropout
functions, distributed_sparse_softmax_cross_entropy_with_logits and the fused self-attention projection.

Legacy's fused kernels (fused_bias_add_gelu, fused_bias_add_mask_scale,
fused_tril_scale_softmax_mask_scale) are composed here from the ops they fuse, so values and
gradients are those ops'; the last node carries the function's name.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error, op_name

__all__ = ["distributed_sparse_softmax_cross_entropy_with_logits", "fused_bias_add_dropout", "fused_bias_add_gelu",
           "fused_scale_tril_softmax_dropout", "fused_self_attention_query_mul_key_and_value", "softmax_grad"]


def _rate(what: str, rate: Any) -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise build_error(what, f"rate must be a number in [0, 1), got {rate!r}")
    return float(rate)


def _no_noise_shape(what: str, noise_shape: Any) -> None:
    # legacy passed it to random_mask_like, which refused any noise_shape in v0.4
    if noise_shape is not None:
        raise build_error(what, f"noise_shape must be None (legacy v0.4 did not support it), got {noise_shape!r}")


def softmax_grad(y: Blob, dy: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """The gradient of softmax from its output: y * (dy - sum(dy * y)) along ``axis``.

    Args:
        y: a softmax output.
        dy: the gradient of y, shaped like y.
        axis: the softmax axis (default -1).
        name: the op name; default ``SoftmaxGrad_<n>``.
    """
    return apply("softmax_grad", [y, dy], {"axis": -1 if axis is None else axis}, name=name)


def fused_bias_add_gelu(value: Blob, bias: Blob, data_format: str | None = None, name: str | None = None) -> Blob:
    """gelu(bias_add(value, bias)): legacy's fused op, composed.

    Args:
        value: a floating blob.
        bias: a 1-d blob with one entry per channel.
        data_format: None or "NC..." (channels at axis 1) or "N...C" (the last axis).
        name: the gelu node's name; default ``FusedBiasAddGelu_<n>`` (the bias add is ``<name>_bias_add``).
    """
    node = op_name(name, "FusedBiasAddGelu")
    biased = apply("bias_add", [value, bias], {"data_format": data_format}, name=f"{node}_bias_add")
    return apply("gelu", [biased], name=node)


def fused_bias_add_dropout(value: Blob, bias: Blob, data_format: str | None = None, rate: float = 0.0,
                           noise_shape: Sequence[int] | None = None, seed: int | None = None,
                           name: str | None = None) -> Blob:
    """dropout(bias_add(value, bias), rate): a fresh mask each train step; predict jobs and rate 0 only add.

    Args:
        value: a floating blob.
        bias: a 1-d blob with one entry per channel.
        data_format: None or "NC..." (channels at axis 1) or "N...C" (the last axis).
        rate: the drop probability, in [0, 1).
        noise_shape: must be None (legacy v0.4 refused it).
        seed: seeds the mask's random stream.
        name: the last node's name; default ``BiasAddDropout_<n>``.
    """
    what = "flow.nn.fused_bias_add_dropout"
    rate = _rate(what, rate)
    _no_noise_shape(what, noise_shape)
    if rate == 0.0:  # legacy: a plain bias_add under the given name
        return apply("bias_add", [value, bias], {"data_format": data_format}, name=name)
    node = op_name(name, "BiasAddDropout")
    biased = apply("bias_add", [value, bias], {"data_format": data_format}, name=f"{node}_bias_add")
    y, _mask = apply("dropout", [biased], {"rate": rate, "noise_shape": None, "seed": seed}, name=node)
    return y


def fused_scale_tril_softmax_dropout(x: Blob, diagonal: int = 0, fill_value: float | int = 0, scale: float | int = 1,
                                     rate: float = 0.0, noise_shape: Sequence[int] | None = None,
                                     seed: int | None = None, name: str | None = None) -> Blob:
    """softmax(fused_scale_tril(x)) along the last axis, times a keep mask scaled by 1/(1-rate).

    As legacy, the mask is ``random_mask_like`` (uniform > rate), drawn in every job, predict ones too.

    Args:
        x: a floating blob of rank >= 2.
        diagonal: the last kept diagonal (0 the main one, > 0 above, < 0 below).
        fill_value: written above it (not scaled).
        scale: multiplies the kept part.
        rate: the drop probability, in [0, 1).
        noise_shape: must be None (legacy v0.4 refused it).
        seed: seeds the mask's random stream.
        name: the last node's name; default ``FusedTrilScaleSoftmaxMaskScale_<n>``.
    """
    from flowjob_ops.sorting_ops import fused_scale_tril

    what = "flow.math.fused_scale_tril_softmax_dropout"
    rate = _rate(what, rate)
    _no_noise_shape(what, noise_shape)
    if not isinstance(x, Blob):
        raise TypeError(f"{what}: x must be a blob, got {type(x).__name__}")
    node = op_name(name, "FusedTrilScaleSoftmaxMaskScale")
    tril = fused_scale_tril(x, diagonal, fill_value, scale, name=f"{node}_tril")
    if rate == 0.0:  # every element kept, scale 1
        return apply("softmax", [tril], {"axis": -1}, name=node)
    soft = apply("softmax", [tril], {"axis": -1}, name=f"{node}_softmax")
    mask = apply("random_mask_like", [x], {"rate": rate, "seed": seed}, name=f"{node}-dropout_random_mask_like")
    mask = apply("cast", [mask], {"dtype": x.dtype}, name=f"{node}_mask_cast")
    kept = apply("multiply", [soft, mask], name=f"{node}_mask")
    return apply("scalar_mul", [kept], {"scalar": 1.0 / (1.0 - rate)}, name=node)


def distributed_sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Legacy's class-split sparse softmax cross entropy; on one process it is the plain one.

    Args:
        labels: integer class indices shaped like logits without its last axis (or with a last axis of 1).
        logits: a floating blob (..., classes).
        name: the op name; default ``DistributedSparseSoftmaxCrossEntropy_<n>``.
    """
    from flowjob_ops.nn import sparse_softmax_cross_entropy_with_logits

    node = op_name(name, "DistributedSparseSoftmaxCrossEntropy")
    return sparse_softmax_cross_entropy_with_logits(labels, logits, name=node)


def fused_self_attention_query_mul_key_and_value(x: Blob, head_size: int, alpha: float = 1.0,
                                                 name: str | None = None) -> tuple[Blob, Blob]:
    """Split (seq_len, batch, heads * 3 * head_size) hidden states into per-head q, k, v and give
    (alpha * q @ k^T, v), shaped (batch, heads, seq_len, seq_len) and (batch, heads, seq_len, head_size).

    Each head's 3 * head_size slice holds its query, key and value in that order (legacy's layout).

    Args:
        x: the floating hidden states.
        head_size: each head's width.
        alpha: scales the query-key products.
        name: the op name; default ``FusedSelfAttentionQueryMulKeyAndValue_<n>``.
    """
    qmk, v = apply("fused_self_attention_query_mul_key_and_value", [x], {"head_size": head_size, "alpha": alpha},
                   name=name)
    return qmk, v
