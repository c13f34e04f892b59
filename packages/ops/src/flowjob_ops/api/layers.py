"""``flow.layers``' dense, convolution (1-D, 2-D, 3-D), prelu and upsample_2d layers, with their variables
named as legacy OneFlow did.

A layer takes one prefix ``P`` (its ``name``, or ``Dense_<n>`` / ``Conv2D_<n>`` from the
process-wide counter) and names everything inside from it without using the counter again:

* dense: variables ``P-weight`` (units, in) and ``P-bias``; ops ``P_matmul``, ``P_bias_add``,
  ``P_activation`` (so lbns read ``Dense_6-weight/out``, ``Dense_6_matmul/out_0``);
* conv1d/2d/3d: variables ``P-weight`` and ``P-bias``; ops ``P`` (the convolution), ``P-bias_add``,
  ``P-activation``.

Legacy v0.4 ran an NDHWC conv3d layer as NCDHW between two transposes, so its weight is
(F, C/groups, kd, kh, kw) in both formats (initialized as NCDHW) and its explicit padding is given in
the layer's own data_format order. Here an NDHWC layer convolves NDHWC directly and transposes the
weight instead (op ``P-weight_transpose``): the same variable, the same results, less data moved.

Names are namespaced by ``flow.scope.namespace`` like every op and variable name.
"""
from __future__ import annotations

import inspect
import numbers
from typing import Any, Callable, Sequence

from flowjob_core import Blob, apply, get_variable
from flowjob_core.ir import naming

from flowjob_ops.api._common import build_error
from flowjob_ops.api._initializers import Constant, variance_scaling
from flowjob_ops.api._windows import conv_nodes
from flowjob_ops.kernels import window2d as pads
from flowjob_ops.kernels.window import FORMATS


__all__ = ["conv1d", "conv2d", "conv3d", "dense", "prelu", "upsample_2d"]


def _fail(layer: str, message: str) -> Exception:
    return build_error(f"flow.layers.{layer}", message)


def _activate(activation: Callable[..., Blob] | None, x: Blob, name: str) -> Blob:
    """``activation(x, name=name)`` when the activation takes a name, else ``activation(x)``."""
    if activation is None:
        return x
    try:
        takes_name = "name" in inspect.signature(activation).parameters
    except (TypeError, ValueError):  # builtins and C callables have no readable signature
        takes_name = False
    return activation(x, name=name) if takes_name else activation(x)


def dense(inputs: Blob, units: int, activation: Callable[..., Blob] | None = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
          bias_regularizer: Any = None, trainable: bool = True, name: str | None = None,
          model_distribute: Any = None, *, activity_regularizer: Any = None) -> Blob:
    """A fully connected layer: ``activation(inputs @ weight.T + bias)``.

    Args:
        inputs: a floating blob (N, in); a blob of rank > 2 is reshaped to (-1, in) and the
            result back to inputs.shape[:-1] + (units,), as legacy did.
        units: the number of outputs.
        activation: a function such as ``flow.nn.relu``, applied as op ``<P>_activation``.
        use_bias: add a bias variable.
        kernel_initializer: the weight's initializer; default constant 0 (legacy).
        bias_initializer: the bias's initializer; default constant 0.
        kernel_regularizer: passed to ``flow.get_variable`` for the weight.
        bias_regularizer: passed to ``flow.get_variable`` for the bias.
        trainable: whether the optimizer updates the variables.
        name: the prefix P; default ``Dense_<n>``.
        model_distribute: ``flow.distribute.broadcast()`` (the default), ``auto()`` or ``split(0)``
            (rank-2 inputs only), as legacy: the weight's and the bias's ``distribute`` (split(0) splits them by
            units over the ranks, docs/distributed.md); on one device every layout is the same computation.
        activity_regularizer: keyword only, None: legacy's dense had no such argument (a regularizer
            on the output is not implemented), so any other value is refused.

    Returns:
        The output blob (N, units).
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.dense: inputs must be a blob, got {type(inputs).__name__}")
    if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units < 1:
        raise _fail("dense", f"units must be a positive int, got {units!r}")
    if len(inputs.shape) < 2:
        raise _fail("dense", f"inputs must have rank >= 2, got shape {inputs.shape}")
    if activity_regularizer is not None:
        raise _fail("dense", "activity_regularizer is not supported (legacy dense had none); add the penalty "
                             "of the output to the loss yourself")
    _check_model_distribute(model_distribute, len(inputs.shape))
    prefix = name if name is not None else naming.unique_name("Dense")
    in_shape = inputs.shape
    x = inputs
    if len(in_shape) > 2:
        x = apply("reshape", [x], {"shape": (-1, in_shape[-1])}, name=f"{prefix}_reshape_in")
    weight = get_variable(f"{prefix}-weight", shape=(int(units), in_shape[-1]), dtype=inputs.dtype,
                          initializer=kernel_initializer or Constant(value=0),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight",
                          distribute=model_distribute)
    out = apply("matmul", [x, weight], {"transpose_a": False, "transpose_b": True}, name=f"{prefix}_matmul")
    if use_bias:
        bias = get_variable(f"{prefix}-bias", shape=(int(units),), dtype=inputs.dtype,
                            initializer=bias_initializer or Constant(value=0),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias",
                            distribute=model_distribute)
        out = apply("bias_add", [out, bias], {"data_format": None}, name=f"{prefix}_bias_add")
    out = _activate(activation, out, f"{prefix}_activation")
    if len(in_shape) > 2:
        out = apply("reshape", [out], {"shape": in_shape[:-1] + (int(units),)}, name=f"{prefix}_reshape_out")
    return out


def _check_model_distribute(model_distribute: Any, rank: int) -> None:
    """Legacy took broadcast, auto or split(0) for dense's variables; split(0) only for 2-d inputs."""
    if model_distribute is None:
        return
    kind, axis = getattr(model_distribute, "kind", None), getattr(model_distribute, "axis", None)
    if kind in ("broadcast", "auto"):
        return
    if kind == "split" and axis == 0:
        if rank != 2:
            raise _fail("dense", f"model_distribute split(0) needs 2-d inputs, got rank {rank}")
        return
    raise _fail("dense", "model_distribute must be flow.distribute.broadcast(), auto() or split(0), "
                         f"got {model_distribute!r}")


def _pair(value: Any, what: str) -> tuple[int, int]:
    try:
        return pads.normalize_pair(value, what)
    except ValueError as exc:
        raise _fail("conv2d", str(exc)) from None


def _positive(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _layer_format(rank: int, data_format: Any) -> str:
    """The layer's data format: 2-D also reads 'channels_first' / 'channels_last', 1-D and 3-D only their names."""
    if rank == 2:
        try:
            return pads.check_data_format(data_format)
        except ValueError as exc:
            raise _fail("conv2d", str(exc)) from None
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    first, last = FORMATS[rank]
    if fmt not in (first, last):
        raise _fail(f"conv{rank}d", f"data_format must be '{first}' or '{last}', got {data_format!r}")
    return fmt


def _kernel_size(rank: int, kernel_size: Any) -> tuple[int, ...]:
    if rank == 2:
        return _pair(kernel_size, "kernel_size")
    sizes = list(kernel_size) if isinstance(kernel_size, (list, tuple)) else [kernel_size] * rank
    if len(sizes) != rank or not all(_positive(k) for k in sizes):
        forms = "a list of one" if rank == 1 else f"a list of {rank}"
        raise _fail(f"conv{rank}d", f"kernel_size must be a positive int or {forms}, got {kernel_size!r}")
    return tuple(int(k) for k in sizes)


def _conv_layer(rank: int, inputs: Blob, filters: int, kernel_size: Any, strides: Any, padding: Any,
                data_format: str, dilation_rate: Any, groups: int, activation: Callable[..., Blob] | None,
                use_bias: bool, kernel_initializer: Any, bias_initializer: Any, kernel_regularizer: Any,
                bias_regularizer: Any, trainable: bool, name: str | None, weight_name: str | None,
                bias_name: str | None) -> Blob:
    """``flow.layers.conv<rank>d``: the layer's checks, its variables, the convolution of ``flow.nn.conv<rank>d``
    (``_windows.conv_nodes``) named ``P``, then ``P-bias_add`` and ``P-activation``."""
    layer = f"conv{rank}d"
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.{layer}: inputs must be a blob, got {type(inputs).__name__}")
    fmt = _layer_format(rank, data_format)
    if len(inputs.shape) != rank + 2:
        raise _fail(layer, f"inputs must be {rank + 2}-d ({fmt}), got shape {inputs.shape}")
    if not _positive(filters):
        raise _fail(layer, f"filters must be a positive int, got {filters!r}")
    if not _positive(groups):
        raise _fail(layer, f"groups must be a positive int, got {groups!r}")
    last = fmt.endswith("C")
    channels = inputs.shape[-1] if last else inputs.shape[1]
    if channels % groups or filters % groups:
        raise _fail(layer, f"groups={groups} must divide the input channels ({channels}) and filters ({filters})")
    ksize = _kernel_size(rank, kernel_size)
    prefix = name if name is not None else naming.unique_name(_PREFIXES[rank])
    per_group = channels // int(groups)
    # legacy's 3-D layer kept its weight channels first for both formats (see the module docstring)
    weight_format = FORMATS[rank][0] if rank == 3 else fmt
    shape = (int(filters), *ksize, per_group) if weight_format.endswith("C") else (int(filters), per_group, *ksize)
    weight = get_variable(weight_name or f"{prefix}-weight", shape=shape, dtype=inputs.dtype,
                          initializer=kernel_initializer or variance_scaling(1.0, "fan_avg", "random_uniform",
                                                                             weight_format),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight")
    dilations = dilation_rate
    if rank == 2:
        strides = _pair(strides, "strides")
        dilations = _pair(1 if dilation_rate is None else dilation_rate, "dilation_rate")
    if weight_format != fmt:
        weight = apply("transpose", [weight], {"perm": (0, 2, 3, 4, 1)}, name=f"{prefix}-weight_transpose")
        # flow.nn.conv3d reads 5 explicit entries in NCDHW order (legacy); the layer takes them in its own order
        if isinstance(padding, (list, tuple)) and len(padding) == 5:
            padding = [padding[0], padding[4], padding[1], padding[2], padding[3]]
    out = conv_nodes(rank, inputs, weight, strides, padding, fmt, dilations, int(groups), prefix)
    if use_bias:
        bias = get_variable(bias_name or f"{prefix}-bias", shape=(int(filters),), dtype=inputs.dtype,
                            initializer=bias_initializer or Constant(value=0.0),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias")
        out = apply("bias_add", [out, bias], {"data_format": fmt}, name=f"{prefix}-bias_add")
    return _activate(activation, out, f"{prefix}-activation")


_PREFIXES = {1: "Conv1d", 2: "Conv2D", 3: "Conv3d"}


def conv2d(inputs: Blob, filters: int, kernel_size: int | Sequence[int] = 1, strides: int | Sequence[int] = 1,
           padding: Any = "VALID", data_format: str = "NCHW", dilation_rate: int | Sequence[int] | None = 1,
           groups: int = 1, activation: Callable[..., Blob] | None = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
           bias_regularizer: Any = None, trainable: bool = True, name: str | None = None,
           weight_name: str | None = None, bias_name: str | None = None) -> Blob:
    """A 2-D convolution layer: ``activation(conv2d(inputs, weight) + bias)``.

    Args:
        inputs: a 4-d floating blob, (N, C, H, W) or (N, H, W, C).
        filters: the number of output channels F.
        kernel_size: an int or (kh, kw).
        strides: an int or (sh, sw).
        padding: "SAME", "VALID" or explicit pads.
        data_format: "NCHW" (weight (F, C/groups, kh, kw)) or "NHWC" (weight (F, kh, kw, C/groups)).
        dilation_rate: an int or (dh, dw); None (legacy's default) is 1.
        groups: the number of channel groups; divides C and F.
        activation: a function such as ``flow.nn.relu``, applied as op ``<P>-activation``.
        use_bias: add a bias variable (F,).
        kernel_initializer: default xavier_uniform for ``data_format`` (the v0.2 default).
        bias_initializer: default zeros.
        kernel_regularizer: passed to ``flow.get_variable`` for the weight.
        bias_regularizer: passed to ``flow.get_variable`` for the bias.
        trainable: whether the optimizer updates the variables.
        name: the prefix P (also the convolution op's name); default ``Conv2D_<n>``.
        weight_name: the weight variable's name; default ``<P>-weight``.
        bias_name: the bias variable's name; default ``<P>-bias``.

    Returns:
        The output blob.
    """
    return _conv_layer(2, inputs, filters, kernel_size, strides, padding, data_format, dilation_rate, groups,
                       activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                       bias_regularizer, trainable, name, weight_name, bias_name)


def conv1d(inputs: Blob, filters: int, kernel_size: int | Sequence[int] = 1, strides: int | Sequence[int] = 1,
           padding: Any = "VALID", data_format: str = "NCW", dilation_rate: int | Sequence[int] | None = None,
           groups: int = 1, activation: Callable[..., Blob] | None = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
           bias_regularizer: Any = None, trainable: bool = True, name: str | None = None,
           weight_name: str | None = None, bias_name: str | None = None) -> Blob:
    """A 1-D convolution layer: ``activation(flow.nn.conv1d(inputs, weight) + bias)``, named like conv2d's.

    Args:
        inputs: a 3-d floating blob, (N, C, W) for NCW or (N, W, C) for NWC.
        filters: the number of output channels F.
        kernel_size: an int or a list of one.
        strides: an int or a list of one.
        padding: as ``flow.nn.conv1d`` ("SAME" is "SAME_LOWER", as legacy).
        data_format: "NCW" (weight (F, C/groups, k)) or "NWC" (weight (F, k, C/groups)).
        dilation_rate: an int or a list of one; default 1.
        groups: the number of channel groups; divides C and F.
        activation: a function such as ``flow.nn.relu``, applied as op ``<P>-activation``.
        use_bias: add a bias variable (F,).
        kernel_initializer: default xavier_uniform for ``data_format`` (legacy).
        bias_initializer: default zeros.
        kernel_regularizer: passed to ``flow.get_variable`` for the weight.
        bias_regularizer: passed to ``flow.get_variable`` for the bias.
        trainable: whether the optimizer updates the variables.
        name: the prefix P (the ``flow.nn.conv1d`` prefix too); default ``Conv1d_<n>``.
        weight_name: the weight variable's name; default ``<P>-weight``.
        bias_name: the bias variable's name; default ``<P>-bias``.

    Returns:
        The output blob, (N, F, OW) or (N, OW, F).
    """
    return _conv_layer(1, inputs, filters, kernel_size, strides, padding, data_format, dilation_rate, groups,
                       activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                       bias_regularizer, trainable, name, weight_name, bias_name)


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
    return _conv_layer(3, inputs, filters, kernel_size, strides, padding, data_format, dilation_rate, groups,
                       activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                       bias_regularizer, trainable, name, weight_name, bias_name)


def prelu(inputs: Blob, alpha_initializer: Any = None, alpha_regularizer: Any = None,
          shared_axes: Sequence[int] | None = None, trainable: bool = True, name: str = "PRelu",
          model_distribute: Any = None) -> Blob:
    """Parametric relu: ``inputs`` where positive, else ``alpha * inputs``, with a learned alpha (legacy v0.4).

    The variable ``<name>-alpha`` is shaped ``inputs.shape[1:]`` with extent 1 on each shared axis
    (alpha is shared along those axes and always along the batch axis 0); the op is named ``name``.

    Args:
        inputs: a floating blob of rank >= 2.
        alpha_initializer: default constant 0 (legacy), so the layer starts as relu.
        alpha_regularizer: passed to ``flow.get_variable`` for alpha.
        shared_axes: axes in [1, rank) sharing one alpha, e.g. [2, 3] for one alpha per NCHW channel.
        trainable: whether the optimizer updates alpha.
        name: the op name and the variable's prefix; legacy's fixed default ``PRelu``.
        model_distribute: a ``flow.distribute`` layout for alpha or None (legacy's default broadcast); on
            one device every layout is the same computation.

    Returns:
        A blob like inputs.
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.prelu: inputs must be a blob, got {type(inputs).__name__}")
    rank = len(inputs.shape)
    if rank < 2:
        raise _fail("prelu", f"inputs must have rank >= 2 (axis 0 is the batch), got shape {inputs.shape}")
    if not isinstance(name, str) or not name:
        raise _fail("prelu", f"name must be a non-empty string, got {name!r}")
    if model_distribute is not None and getattr(model_distribute, "kind", None) not in ("broadcast", "auto", "split"):
        raise _fail("prelu", f"model_distribute must be a flow.distribute layout or None, got {model_distribute!r}")
    alpha_shape = list(inputs.shape[1:])
    if shared_axes is not None:
        if isinstance(shared_axes, (str, bytes)) or not isinstance(shared_axes, Sequence):
            raise _fail("prelu", f"shared_axes must be a list of ints in [1, {rank}), got {shared_axes!r}")
        for axis in shared_axes:
            if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not 1 <= axis < rank:
                raise _fail("prelu", f"shared_axes must hold ints in [1, {rank}), got {list(shared_axes)!r}")
            alpha_shape[axis - 1] = 1
    alpha = get_variable(f"{name}-alpha", shape=tuple(alpha_shape), dtype=inputs.dtype,
                         initializer=alpha_initializer or Constant(value=0),
                         regularizer=alpha_regularizer, trainable=trainable, model_name="alpha")
    return apply("prelu", [inputs, alpha], name=name)


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
