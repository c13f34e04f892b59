"""``flow.layers``: dense and conv2d with their variables, named as legacy OneFlow 0.1 did.

A layer takes one prefix ``P`` (its ``name``, or ``Dense_<n>`` / ``Conv2D_<n>`` from the
process-wide counter) and names everything inside from it without using the counter again:

* dense: variables ``P-weight`` (units, in) and ``P-bias``; ops ``P_matmul``, ``P_bias_add``,
  ``P_activation`` (so lbns read ``Dense_6-weight/out``, ``Dense_6_matmul/out_0``);
* conv2d: variables ``P-weight`` and ``P-bias``; ops ``P`` (the convolution), ``P-bias_add``,
  ``P-activation``.

Names are namespaced by ``flow.scope.namespace`` like every op and variable name.
"""
from __future__ import annotations

import inspect
import numbers
from typing import Any, Callable, Sequence

from flowjob_core import Blob, apply, get_variable, maybe_builder, naming, scope

from flowjob_ops import initializers
from flowjob_ops.records.common import build_error
from flowjob_ops.records.normalization import check_epsilon, check_momentum
from flowjob_ops.kernels import padding as pads

__all__ = ["conv1d", "conv2d", "dense",
           "batch_normalization", "layer_norm",  # normalization layers (legacy v0.4)
           "batch_normalization_add_relu", "batch_normalization_relu", "prelu"]


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
            (rank-2 inputs only), as legacy; on one device every layout is the same computation.
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
                          initializer=kernel_initializer or initializers.constant_initializer(0),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight")
    out = apply("matmul", [x, weight], {"transpose_a": False, "transpose_b": True}, name=f"{prefix}_matmul")
    if use_bias:
        bias = get_variable(f"{prefix}-bias", shape=(int(units),), dtype=inputs.dtype,
                            initializer=bias_initializer or initializers.constant_initializer(0),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias")
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
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.conv2d: inputs must be a blob, got {type(inputs).__name__}")
    try:
        fmt = pads.check_data_format(data_format)
    except ValueError as exc:
        raise _fail("conv2d", str(exc)) from None
    if len(inputs.shape) != 4:
        raise _fail("conv2d", f"inputs must be 4-d ({fmt}), got shape {inputs.shape}")
    if isinstance(filters, bool) or not isinstance(filters, numbers.Integral) or filters < 1:
        raise _fail("conv2d", f"filters must be a positive int, got {filters!r}")
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise _fail("conv2d", f"groups must be a positive int, got {groups!r}")
    channels = inputs.shape[1] if fmt == "NCHW" else inputs.shape[3]
    if channels % groups or filters % groups:
        raise _fail("conv2d", f"groups={groups} must divide the input channels ({channels}) and filters ({filters})")
    kh, kw = _pair(kernel_size, "kernel_size")
    prefix = name if name is not None else naming.unique_name("Conv2D")
    shape = (int(filters), channels // groups, kh, kw) if fmt == "NCHW" else (int(filters), kh, kw, channels // groups)
    weight = get_variable(weight_name or f"{prefix}-weight", shape=shape, dtype=inputs.dtype,
                          initializer=kernel_initializer or initializers.xavier_uniform_initializer(fmt),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight")
    attrs = {"strides": _pair(strides, "strides"), "padding": padding, "data_format": fmt,
             "dilations": _pair(1 if dilation_rate is None else dilation_rate, "dilation_rate"), "groups": int(groups)}
    out = apply("conv2d", [inputs, weight], attrs, name=prefix)
    if use_bias:
        bias = get_variable(bias_name or f"{prefix}-bias", shape=(int(filters),), dtype=inputs.dtype,
                            initializer=bias_initializer or initializers.zeros_initializer(),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias")
        out = apply("bias_add", [out, bias], {"data_format": fmt}, name=f"{prefix}-bias_add")
    return _activate(activation, out, f"{prefix}-activation")


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
    from flowjob_ops import nn

    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.conv1d: inputs must be a blob, got {type(inputs).__name__}")
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in ("NCW", "NWC"):
        raise _fail("conv1d", f"data_format must be 'NCW' or 'NWC', got {data_format!r}")
    if len(inputs.shape) != 3:
        raise _fail("conv1d", f"inputs must be 3-d ({fmt}), got shape {inputs.shape}")
    if isinstance(filters, bool) or not isinstance(filters, numbers.Integral) or filters < 1:
        raise _fail("conv1d", f"filters must be a positive int, got {filters!r}")
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise _fail("conv1d", f"groups must be a positive int, got {groups!r}")
    channels = inputs.shape[1] if fmt == "NCW" else inputs.shape[2]
    if channels % groups or filters % groups:
        raise _fail("conv1d", f"groups={groups} must divide the input channels ({channels}) and filters ({filters})")
    sizes = list(kernel_size) if isinstance(kernel_size, (list, tuple)) else [kernel_size]
    if len(sizes) != 1 or isinstance(sizes[0], bool) or not isinstance(sizes[0], numbers.Integral) or sizes[0] < 1:
        raise _fail("conv1d", f"kernel_size must be a positive int or a list of one, got {kernel_size!r}")
    k = int(sizes[0])
    prefix = name if name is not None else naming.unique_name("Conv1d")
    shape = (int(filters), channels // groups, k) if fmt == "NCW" else (int(filters), k, channels // groups)
    weight = get_variable(weight_name or f"{prefix}-weight", shape=shape, dtype=inputs.dtype,
                          initializer=kernel_initializer or initializers.xavier_uniform_initializer(fmt),
                          regularizer=kernel_regularizer, trainable=trainable, model_name="weight")
    out = nn.conv1d(inputs, weight, strides, padding, fmt, dilation_rate, int(groups), name=prefix)
    if use_bias:
        bias = get_variable(bias_name or f"{prefix}-bias", shape=(int(filters),), dtype=inputs.dtype,
                            initializer=bias_initializer or initializers.zeros_initializer(),
                            regularizer=bias_regularizer, trainable=trainable, model_name="bias")
        out = apply("bias_add", [out, bias], {"data_format": fmt}, name=f"{prefix}-bias_add")
    return _activate(activation, out, f"{prefix}-activation")


# normalization layers ----------------------------------------------------------------------
def _norm_axis(layer: str, axis: Any, rank: int, what: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -rank <= axis < rank:
        raise _fail(layer, f"{what} must be an int in [{-rank}, {rank}) for a rank-{rank} input, got {axis!r}")
    return int(axis) % rank


def _is_train_job() -> bool:
    builder = maybe_builder()
    return builder is not None and builder.job.type == "train"


def batch_normalization(inputs: Blob, axis: int = -1, momentum: float = 0.99, epsilon: float = 0.001,
                        center: bool = True, scale: bool = True, beta_initializer: Any = None,
                        gamma_initializer: Any = None, beta_regularizer: Any = None, gamma_regularizer: Any = None,
                        moving_mean_initializer: Any = None, moving_variance_initializer: Any = None,
                        trainable: bool = True, training: bool = True, name: str = "BatchNorm",
                        gamma_name: str | None = None, beta_name: str | None = None,
                        moving_mean_name: str | None = None, moving_variance_name: str | None = None) -> Blob:
    """Batch normalization over every axis but ``axis``, with moving statistics, as legacy v0.4.

    Variables (one value per channel, ``inputs.shape[axis]``): ``<name>-beta`` (zeros) when
    ``center``, ``<name>-gamma`` (ones) when ``scale``, both trainable when ``trainable``;
    ``<name>-moving_mean`` (zeros) and ``<name>-moving_variance`` (ones), never trainable.

    In a train job with ``trainable`` and ``training`` the batch's mean and biased variance normalize
    the inputs (the gradient flows through them), and each step updates the moving statistics in
    place: ``moving = momentum * moving + (1 - momentum) * batch`` (legacy's cpu path, with the
    biased variance). Otherwise (a predict job, or ``training``/``trainable`` False) the moving
    statistics normalize and nothing is updated.

    Args:
        inputs: a floating blob.
        axis: the channel axis; -1 (channels last) by default, 1 for NCHW.
        momentum: the weight of the old moving value, in [0, 1].
        epsilon: added to the variance before the square root.
        center: add the offset beta.
        scale: multiply by gamma.
        beta_initializer: default zeros.
        gamma_initializer: default ones.
        beta_regularizer: passed to ``flow.get_variable`` for beta.
        gamma_regularizer: passed to ``flow.get_variable`` for gamma.
        moving_mean_initializer: default zeros.
        moving_variance_initializer: default ones.
        trainable: whether the optimizer updates beta and gamma (False also means moving statistics).
        training: normalize with batch statistics in train jobs.
        name: the prefix of the variables and the op name; legacy's fixed default ``BatchNorm``, so a
            second layer in a job needs a name of its own.
        gamma_name: the gamma variable's full name instead of ``<name>-gamma`` (legacy v0.4).
        beta_name: likewise for ``<name>-beta``.
        moving_mean_name: likewise for ``<name>-moving_mean``.
        moving_variance_name: likewise for ``<name>-moving_variance``.

    Returns:
        A blob like inputs.
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.batch_normalization: inputs must be a blob, got {type(inputs).__name__}")
    given = {"gamma": gamma_name, "beta": beta_name, "moving_mean": moving_mean_name,
             "moving_variance": moving_variance_name}
    for suffix, full in given.items():
        if full is not None and (not isinstance(full, str) or not full):
            raise _fail("batch_normalization", f"{suffix}_name must be a non-empty string or None, got {full!r}")
    rank = len(inputs.shape)
    axis = _norm_axis("batch_normalization", axis, rank, "axis")
    check = {"momentum": check_momentum, "epsilon": check_epsilon}
    for arg, value in (("momentum", momentum), ("epsilon", epsilon)):
        try:
            check[arg](value, "flow.layers.batch_normalization")
        except ValueError as exc:
            raise _fail("batch_normalization", str(exc).split(": ", 1)[-1]) from None
    if not isinstance(name, str) or not name:
        raise _fail("batch_normalization", f"name must be a non-empty string, got {name!r}")
    shape = (inputs.shape[axis],)
    dtype = inputs.dtype

    def variable(suffix: str, init: Any, default: Any, regularizer: Any, learn: bool) -> Blob:
        return get_variable(given[suffix] or f"{name}-{suffix}", shape=shape, dtype=dtype, initializer=init or default,
                            regularizer=regularizer, trainable=learn)

    beta = variable("beta", beta_initializer, initializers.zeros_initializer(), beta_regularizer,
                    trainable) if center else None
    gamma = variable("gamma", gamma_initializer, initializers.ones_initializer(), gamma_regularizer,
                     trainable) if scale else None
    moving_mean = variable("moving_mean", moving_mean_initializer, initializers.zeros_initializer(), None, False)
    moving_variance = variable("moving_variance", moving_variance_initializer, initializers.ones_initializer(),
                               None, False)
    attrs = {"epsilon": float(epsilon), "with_scale": gamma is not None, "with_offset": beta is not None}
    if _is_train_job() and trainable and training:
        # batch statistics, normalization and (through autodiff) the gradient each in one kernel
        affine = [p for p in (gamma, beta) if p is not None]
        y, mean, variance = apply("batch_norm_train", [inputs] + affine, {"axis": axis, **attrs}, name=name)
        for moving, batch, what in ((moving_mean, mean, "moving_mean"), (moving_variance, variance, "moving_variance")):
            apply("batch_norm_moving_update", [moving, batch], {"momentum": float(momentum)},
                  name=f"{name}-{what}_update")
        return y
    nd = tuple(shape[0] if i == axis else 1 for i in range(rank))
    params = [moving_mean, moving_variance] + [p for p in (gamma, beta) if p is not None]
    labels = ["mean", "variance"] + [w for w, p in (("gamma", gamma), ("beta", beta)) if p is not None]
    shaped = [apply("reshape", [p], {"shape": nd}, name=f"{name}-{w}_reshape") for p, w in zip(params, labels)]
    return apply("batch_norm", [inputs] + shaped, attrs, name=name)


def layer_norm(inputs: Blob, center: bool = True, scale: bool = True, trainable: bool = True,
               begin_norm_axis: int = 1, begin_params_axis: int = -1, epsilon: float = 1e-5,
               name: str = "LayerNorm") -> Blob:
    """Layer normalization: each sample normalized over the axes from ``begin_norm_axis`` on, as legacy v0.4.

    Variables shaped ``inputs.shape[begin_params_axis:]``: ``<name>-beta`` (zeros) when ``center``,
    ``<name>-gamma`` (ones) when ``scale``; with neither, nothing is trainable (legacy).

    Args:
        inputs: a floating blob of rank >= 2.
        center: add beta.
        scale: multiply by gamma.
        trainable: whether the optimizer updates beta and gamma.
        begin_norm_axis: the first normalized axis (the mean and the biased variance run over it and
            every later axis).
        begin_params_axis: the first axis beta and gamma extend over (they broadcast over the earlier ones).
        epsilon: added to the variance before the square root.
        name: the prefix of the variables and the op name; legacy's fixed default ``LayerNorm``.

    Returns:
        A blob like inputs.
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"flow.layers.layer_norm: inputs must be a blob, got {type(inputs).__name__}")
    rank = len(inputs.shape)
    norm_axis = _norm_axis("layer_norm", begin_norm_axis, rank, "begin_norm_axis")
    params_axis = _norm_axis("layer_norm", begin_params_axis, rank, "begin_params_axis")
    try:
        check_epsilon(epsilon, "flow.layers.layer_norm")
    except ValueError as exc:
        raise _fail("layer_norm", str(exc).split(": ", 1)[-1]) from None
    if not isinstance(name, str) or not name:
        raise _fail("layer_norm", f"name must be a non-empty string, got {name!r}")
    if not center and not scale:
        trainable = False
    param_shape = tuple(inputs.shape[params_axis:])
    nd = (1,) * params_axis + param_shape

    def variable(suffix: str, value: float) -> Blob:
        var = get_variable(f"{name}-{suffix}", shape=param_shape, dtype=inputs.dtype,
                           initializer=initializers.constant_initializer(value), trainable=trainable,
                           model_name=suffix)
        return apply("reshape", [var], {"shape": nd}, name=f"{name}-{suffix}_reshape")

    gamma = variable("gamma", 1.0) if scale else None
    beta = variable("beta", 0.0) if center else None
    mean, variance = apply("moments", [inputs], {"axes": tuple(range(norm_axis, rank)), "keepdims": True},
                           name=f"{name}-moments")
    attrs = {"epsilon": float(epsilon), "with_scale": gamma is not None, "with_offset": beta is not None}
    return apply("batch_norm", [inputs, mean, variance] + [p for p in (gamma, beta) if p is not None], attrs,
                 name=name)


def batch_normalization_add_relu(inputs: Blob, addend: Blob | None = None, axis: int = -1, momentum: float = 0.99,
                                 epsilon: float = 0.001, center: bool = True, scale: bool = True,
                                 beta_initializer: Any = None, gamma_initializer: Any = None,
                                 beta_regularizer: Any = None, gamma_regularizer: Any = None,
                                 moving_mean_initializer: Any = None, moving_variance_initializer: Any = None,
                                 trainable: bool = True, training: bool = True, name: str = "BatchNorm",
                                 gamma_name: str | None = None, beta_name: str | None = None,
                                 moving_mean_name: str | None = None,
                                 moving_variance_name: str | None = None) -> Blob:
    """``relu(batch_normalization(inputs) + addend)``, legacy v0.4's fused layer, as its cpu path composed it.

    The variables, their names and the moving-statistics updates are ``batch_normalization``'s
    (every argument but ``addend`` means what it means there); the add and the relu are unnamed ops
    inside namespace ``BatchNormAddRelu`` (``BatchNormAddRelu-Relu_<n>``), as legacy.

    Args:
        inputs: a floating blob.
        addend: a blob of inputs' shape and dtype added before the relu, or None.
        axis: the channel axis; -1 by default.
        momentum: see ``batch_normalization``.
        epsilon: see ``batch_normalization``.
        center: see ``batch_normalization``.
        scale: see ``batch_normalization``.
        beta_initializer: see ``batch_normalization``.
        gamma_initializer: see ``batch_normalization``.
        beta_regularizer: see ``batch_normalization``.
        gamma_regularizer: see ``batch_normalization``.
        moving_mean_initializer: see ``batch_normalization``.
        moving_variance_initializer: see ``batch_normalization``.
        trainable: see ``batch_normalization``.
        training: see ``batch_normalization``.
        name: the prefix of the variables and the batch-norm op; default ``BatchNorm``.
        gamma_name: see ``batch_normalization``.
        beta_name: see ``batch_normalization``.
        moving_mean_name: see ``batch_normalization``.
        moving_variance_name: see ``batch_normalization``.

    Returns:
        A blob like inputs.
    """
    if addend is not None:
        if not isinstance(addend, Blob):
            raise TypeError(f"flow.layers.batch_normalization_add_relu: addend must be a blob or None, "
                            f"got {type(addend).__name__}")
        if isinstance(inputs, Blob) and (addend.shape != inputs.shape or addend.dtype != inputs.dtype):
            raise _fail("batch_normalization_add_relu", f"addend must be like inputs {inputs.shape}:{inputs.dtype}, "
                                                        f"got {addend.shape}:{addend.dtype}")
    out = batch_normalization(inputs, axis, momentum, epsilon, center, scale, beta_initializer, gamma_initializer,
                              beta_regularizer, gamma_regularizer, moving_mean_initializer,
                              moving_variance_initializer, trainable, training, name, gamma_name, beta_name,
                              moving_mean_name, moving_variance_name)
    with scope.namespace("BatchNormAddRelu"):
        if addend is not None:
            out = apply("add", [out, addend])
        return apply("relu", [out])


def batch_normalization_relu(inputs: Blob, axis: int = -1, momentum: float = 0.99, epsilon: float = 0.001,
                             center: bool = True, scale: bool = True, beta_initializer: Any = None,
                             gamma_initializer: Any = None, beta_regularizer: Any = None,
                             gamma_regularizer: Any = None, moving_mean_initializer: Any = None,
                             moving_variance_initializer: Any = None, trainable: bool = True,
                             training: bool = True, name: str = "BatchNorm") -> Blob:
    """``relu(batch_normalization(inputs))``: ``batch_normalization_add_relu`` without an addend, as legacy v0.4.

    Args:
        inputs: a floating blob.
        axis: the channel axis; -1 by default.
        momentum: see ``batch_normalization``.
        epsilon: see ``batch_normalization``.
        center: see ``batch_normalization``.
        scale: see ``batch_normalization``.
        beta_initializer: see ``batch_normalization``.
        gamma_initializer: see ``batch_normalization``.
        beta_regularizer: see ``batch_normalization``.
        gamma_regularizer: see ``batch_normalization``.
        moving_mean_initializer: see ``batch_normalization``.
        moving_variance_initializer: see ``batch_normalization``.
        trainable: see ``batch_normalization``.
        training: see ``batch_normalization``.
        name: the prefix of the variables and the batch-norm op; default ``BatchNorm``.

    Returns:
        A blob like inputs.
    """
    return batch_normalization_add_relu(inputs, None, axis, momentum, epsilon, center, scale, beta_initializer,
                                        gamma_initializer, beta_regularizer, gamma_regularizer,
                                        moving_mean_initializer, moving_variance_initializer, trainable, training,
                                        name)


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
                         initializer=alpha_initializer or initializers.constant_initializer(0),
                         regularizer=alpha_regularizer, trainable=trainable, model_name="alpha")
    return apply("prelu", [inputs, alpha], name=name)


# the 3-d convolution layer (legacy v0.4), written in flowjob_ops.layers3d
from flowjob_ops.layers3d import conv3d  # noqa: E402

__all__ += ["conv3d"]


# legacy v0.4 leftovers (upsample_2d, the layer-norm gradient functions, categorical_ordinal_encoder),
# written in flowjob_ops.extra_layers
from flowjob_ops.extra_layers import (  # noqa: E402
    categorical_ordinal_encoder, layer_norm_grad, layer_norm_param_grad, upsample_2d)

__all__ += ["categorical_ordinal_encoder", "layer_norm_grad", "layer_norm_param_grad", "upsample_2d"]
