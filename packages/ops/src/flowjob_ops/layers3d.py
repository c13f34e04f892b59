"""``flow.layers.conv3d`` (``flowjob_ops.layers`` re-exports it), named like ``layers.conv2d``.

One prefix ``P`` (``name``, or ``Conv3d_<n>``) names everything: variables ``P-weight`` and ``P-bias``,
ops ``P`` (the convolution), ``P-bias_add``, ``P-activation``.

Legacy v0.4 ran an NDHWC layer as NCDHW between two transposes, so its weight is
(F, C/groups, kd, kh, kw) in both formats (initialized as NCDHW) and its explicit padding is given in
the layer's own data_format order. Here an NDHWC layer convolves NDHWC directly and transposes the
weight instead (op ``P-weight_transpose``): the same variable, the same results, less data moved.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from flowjob_core import Blob, apply, get_variable, naming

from flowjob_ops import initializers, nn3d
from flowjob_ops.records.common import build_error

__all__ = ["conv3d"]


def _fail(message: str) -> Exception:
    return build_error("flow.layers.conv3d", message)


def _positive(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _activate(activation: Callable[..., Blob] | None, x: Blob, name: str) -> Blob:
    from flowjob_ops.layers import _activate as activate  # one rule for every layer's activation call

    return activate(activation, x, name)


def conv3d(inputs: Blob, filters: int, kernel_size: int | Sequence[int] = 1, strides: int | Sequence[int] = 1,
           padding: Any = "VALID", data_format: str = "NCDHW", dilation_rate: int | Sequence[int] | None = None,
           groups: int = 1, activation: Callable[..., Blob] | None = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
           bias_regularizer: Any = None, trainable: bool = True, name: str | None = None,
           weight_name: str | None = None, bias_name: str | None = None) -> Blob:
    """A 3-D convolution layer: ``activation(conv3d(inputs, weight) + bias)``.

    Args:
        inputs: a 5-d floating blob, (N, C, D, H, W) for NCDHW or (N, D, H, W, C) for NDHWC.
        filters: the number of output channels F.
        kernel_size: an int or a list of 3.
        strides: an int or a list of 3.
        padding: "SAME" (= "SAME_LOWER", legacy), "SAME_LOWER", "SAME_UPPER", "VALID", or 5
            (before, after) entries in data_format order.
        data_format: "NCDHW" or "NDHWC"; the weight is (F, C/groups, kd, kh, kw) for both (legacy).
        dilation_rate: an int or a list of 3; None (legacy's default) is 1.
        groups: the number of channel groups; divides C and F.
        activation: a function such as ``flow.nn.relu``, applied as op ``<P>-activation``.
        use_bias: add a bias variable (F,).
        kernel_initializer: default xavier_uniform for NCDHW (legacy).
        bias_initializer: default zeros.
        kernel_regularizer: passed to ``flow.get_variable`` for the weight.
        bias_regularizer: passed to ``flow.get_variable`` for the bias.
        trainable: whether the optimizer updates the variables.
        name: the prefix P (also the convolution op's name); default ``Conv3d_<n>``.
        weight_name: the weight variable's name; default ``<P>-weight``.
        bias_name: the bias variable's name; default ``<P>-bias``.

    Returns:
        The output blob, (N, F, OD, OH, OW) or (N, OD, OH, OW, F).
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.conv3d: inputs must be a blob, got {type(inputs).__name__}")
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in ("NCDHW", "NDHWC"):
        raise _fail(f"data_format must be 'NCDHW' or 'NDHWC', got {data_format!r}")
    if len(inputs.shape) != 5:
        raise _fail(f"inputs must be 5-d ({fmt}), got shape {inputs.shape}")
    if not _positive(filters):
        raise _fail(f"filters must be a positive int, got {filters!r}")
    if not _positive(groups):
        raise _fail(f"groups must be a positive int, got {groups!r}")
    channels = inputs.shape[1] if fmt == "NCDHW" else inputs.shape[4]
    if channels % groups or filters % groups:
        raise _fail(f"groups={groups} must divide the input channels ({channels}) and filters ({filters})")
    sizes = list(kernel_size) if isinstance(kernel_size, (list, tuple)) else [kernel_size] * 3
    if len(sizes) != 3 or not all(_positive(k) for k in sizes):
        raise _fail(f"kernel_size must be a positive int or a list of 3, got {kernel_size!r}")
    prefix = name if name is not None else naming.unique_name("Conv3d")
    weight = get_variable(weight_name or f"{prefix}-weight",
                          shape=(int(filters), channels // int(groups), *(int(k) for k in sizes)),
                          dtype=inputs.dtype,
                          initializer=kernel_initializer or initializers.xavier_uniform_initializer("NCDHW"),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight")
    if fmt == "NDHWC":
        weight = apply("transpose", [weight], {"perm": (0, 2, 3, 4, 1)}, name=f"{prefix}-weight_transpose")
    # nn.conv3d reads 5 explicit entries in NCDHW order (legacy); the layer takes them in its own order
    if not isinstance(padding, str) and fmt == "NDHWC" and isinstance(padding, (list, tuple)) and len(padding) == 5:
        padding = [padding[0], padding[4], padding[1], padding[2], padding[3]]
    out = nn3d.conv3d(inputs, weight, strides, padding, fmt, dilation_rate, int(groups), name=prefix)
    if use_bias:
        bias = get_variable(bias_name or f"{prefix}-bias", shape=(int(filters),), dtype=inputs.dtype,
                            initializer=bias_initializer or initializers.zeros_initializer(),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias")
        out = apply("bias_add", [out, bias], {"data_format": fmt}, name=f"{prefix}-bias_add")
    return _activate(activation, out, f"{prefix}-activation")
