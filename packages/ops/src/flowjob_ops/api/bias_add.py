"""``flow.nn.bias_add`` and legacy v0.4's fused forms (BERT's fused_bias_add_gelu, fused_bias_add_dropout).

Legacy's fused kernels (fused_bias_add_gelu, fused_bias_add_mask_scale) are composed here from the ops
they fuse, so values and gradients are those ops'; the last node carries the function's name.
"""
from __future__ import annotations

from typing import Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import dropout_rate, op_name, refuse_noise_shape


__all__ = ["bias_add", "fused_bias_add_dropout", "fused_bias_add_gelu"]


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
    rate = dropout_rate(what, rate)
    refuse_noise_shape(what, noise_shape)
    if rate == 0.0:  # legacy: a plain bias_add under the given name
        return apply("bias_add", [value, bias], {"data_format": data_format}, name=name)
    node = op_name(name, "BiasAddDropout")
    biased = apply("bias_add", [value, bias], {"data_format": data_format}, name=f"{node}_bias_add")
    y, _mask = apply("dropout", [biased], {"rate": rate, "noise_shape": None, "seed": seed}, name=node)
    return y
