"""``flow.layers`` names of legacy v0.4 left over: upsample_2d, layer_norm_grad, layer_norm_param_grad and
categorical_ordinal_encoder (its hash table in two non-trainable variables)."""
from __future__ import annotations

import numbers
from typing import Sequence

from flowjob_core import Blob, apply, get_variable, scope

from flowjob_ops import initializers
from flowjob_ops.records.common import build_error
from flowjob_ops.extra_toplevel import categorical_ordinal_encode

__all__ = ["categorical_ordinal_encoder", "layer_norm_grad", "layer_norm_param_grad", "upsample_2d"]


def upsample_2d(x: Blob, size: int | Sequence[int] = (2, 2), align_corners: bool = False,
                data_format: str = "NCHW", interpolation: str = "nearest", name: str = "Upsample2D") -> Blob:
    """Upsample the two spatial axes by (height_scale, width_scale), nearest or bilinear, as legacy v0.4.

    Args:
        x: a floating rank-4 blob.
        size: (height_scale, width_scale), or one number for both; the output extents are int(scale * extent).
        align_corners: bilinear only: corner pixels map to corner pixels.
        data_format: "NCHW" or "NHWC" (NHWC is transposed to NCHW and back around the op, as legacy).
        interpolation: "nearest" or "bilinear".
        name: the op name (legacy's fixed default ``Upsample2D``).

    Returns:
        The upsampled blob in x's data format.
    """
    what = "flow.layers.upsample_2d"
    if isinstance(size, numbers.Real) and not isinstance(size, bool):
        scales = (size, size)
    elif isinstance(size, (list, tuple)) and len(size) == 2:
        scales = tuple(size)
    else:
        raise build_error(what, f"size must be a number or a pair (height_scale, width_scale), got {size!r}")
    if interpolation not in ("nearest", "bilinear"):
        raise build_error(what, f'interpolation must be "nearest" or "bilinear", got {interpolation!r}')
    if interpolation == "nearest" and align_corners:
        raise build_error(what, 'interpolation "nearest" does not support align_corners')
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in ("NCHW", "NHWC"):
        raise build_error(what, f'data_format must be "NHWC" or "NCHW", got {data_format!r}')
    if fmt == "NHWC":
        x = apply("transpose", [x], {"perm": (0, 3, 1, 2)})
    attrs = {"height_scale": scales[0], "width_scale": scales[1], "align_corners": align_corners,
             "interpolation": interpolation}
    y = apply("upsample", [x], attrs, name=name)
    if fmt == "NHWC":
        y = apply("transpose", [y], {"perm": (0, 2, 3, 1)})
    return y


def layer_norm_grad(dy: Blob, x: Blob, mean: Blob, inv_variance: Blob, begin_norm_axis: int = 1,
                    name: str = "LayerNormGrad") -> Blob:
    """The input gradient of layer normalization over the axes from ``begin_norm_axis`` on.

    Args:
        dy: the gradient of the normalized output, shaped like x.
        x: the normalized input.
        mean: x's mean over the normalized axes, shaped x.shape[:begin_norm_axis].
        inv_variance: 1 / sqrt(variance + epsilon), shaped like mean.
        begin_norm_axis: the first normalized axis (>= 1; negative counts from the end).
        name: the op name (legacy's default ``LayerNormGrad``).
    """
    return apply("layer_norm_grad", [dy, x, mean, inv_variance], {"begin_norm_axis": begin_norm_axis}, name=name)


def layer_norm_param_grad(dy: Blob, norm: Blob, gamma: Blob, begin_params_axis: int = -1,
                          name: str = "LayerNormParamGrad") -> tuple[Blob, Blob, Blob]:
    """Gradients of layer normalization's affine part y = norm * gamma + beta.

    Args:
        dy: the gradient of y.
        norm: the normalized values, shaped like dy.
        gamma: the scale, shaped dy.shape[begin_params_axis:].
        begin_params_axis: the first parameter axis (>= 1 once negative values count from the end: -1, the
            default, is the last axis; legacy's op refused negative values although its default was -1).
        name: the op name (legacy's default ``LayerNormParamGrad``).

    Returns:
        (normalized_diff = dy * gamma, beta_diff, gamma_diff), the last two summed over the leading axes.
    """
    outs = apply("layer_norm_param_grad", [dy, norm, gamma], {"begin_params_axis": begin_params_axis}, name=name)
    return outs[0], outs[1], outs[2]


def categorical_ordinal_encoder(input_tensor: Blob, capacity: int, hash_precomputed: bool = True,
                                name: str = "CategoricalOrdinalEncoder") -> Blob:
    """``flow.categorical_ordinal_encode`` on its own table: variables ``<name>-Table`` (2 * capacity,) and
    ``<name>-Size`` (1,), of input_tensor's dtype, zero-initialised and not trainable; the op is ``<name>-Encode``.

    Args:
        input_tensor: an int32/int64 blob of precomputed hash values.
        capacity: how many distinct values the table can hold.
        hash_precomputed: must be True.
        name: the namespace of the variables and the op.
    """
    what = "flow.layers.categorical_ordinal_encoder"
    if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral) or capacity < 1:
        raise build_error(what, f"capacity must be a positive int, got {capacity!r}")
    if not isinstance(input_tensor, Blob):
        raise TypeError(f"{what}: input_tensor must be a blob, got {type(input_tensor).__name__}")
    dtype = input_tensor.dtype
    with scope.namespace(name):
        table = get_variable("Table", shape=(2 * int(capacity),), dtype=dtype,
                             initializer=initializers.constant_initializer(0, dtype=dtype), trainable=False,
                             reuse=False)
        size = get_variable("Size", shape=(1,), dtype=dtype,
                            initializer=initializers.constant_initializer(0, dtype=dtype), trainable=False,
                            reuse=False)
        return categorical_ordinal_encode(table, size, input_tensor, hash_precomputed, name="Encode")
