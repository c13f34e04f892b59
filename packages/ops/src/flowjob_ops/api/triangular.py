"""Lower triangles of the last two axes (legacy v0.4, in ``flow.math`` and ``flow.nn`` alike): tril,
fused_scale_tril and the fused causal softmax fused_scale_tril_softmax_dropout.

Legacy's fused kernel (fused_tril_scale_softmax_mask_scale) is composed from the ops it fuses, so values
and gradients are those ops'; the last node carries the function's name.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, dropout_rate, op_name, refuse_noise_shape


__all__ = ["fused_scale_tril", "fused_scale_tril_softmax_dropout", "tril"]


def _number(what: str, arg: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"{arg} must be a Python number, got {value!r}")
    return value


def tril(x: Blob, diagonal: int = 0, fill_value: float | int = 0, name: str | None = None) -> Blob:
    """The lower triangle of the last two axes: element (i, j) is kept when ``j <= i + diagonal``.

    Args:
        x: a numeric blob of rank >= 2.
        diagonal: which diagonal bounds the triangle (> 0 above the main one, < 0 below).
        fill_value: the value of the dropped elements.
        name: the op name; default ``Tril_<n>``.
    """
    attrs = {"diagonal": diagonal, "fill_value": _number("flow.math.tril", "fill_value", fill_value)}
    return apply("tril", [x], attrs, name=name)


def fused_scale_tril(x: Blob, diagonal: int = 0, fill_value: float | int = 0, scale: float | int = 1,
                     name: str | None = None) -> Blob:
    """``tril(x * scale)`` in one op; the fill value is not scaled.

    Args:
        x: a numeric blob of rank >= 2.
        diagonal: which diagonal bounds the triangle.
        fill_value: the value of the dropped elements.
        scale: the factor of the kept ones.
        name: the op name; default ``FusedScaleTril_<n>``.
    """
    attrs = {"diagonal": diagonal, "fill_value": _number("flow.math.fused_scale_tril", "fill_value", fill_value),
             "scale": _number("flow.math.fused_scale_tril", "scale", scale)}
    return apply("fused_scale_tril", [x], attrs, name=name)


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
    what = "flow.math.fused_scale_tril_softmax_dropout"
    rate = dropout_rate(what, rate)
    refuse_noise_shape(what, noise_shape)
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
