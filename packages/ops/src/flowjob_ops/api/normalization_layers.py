"""``flow.layers``' normalization layers with their variables (batch_normalization, its fused ReLU and add-ReLU
forms, layer_norm), and the layer-norm gradient functions legacy exported beside them."""
from __future__ import annotations

import numbers
from typing import Any

from flowjob_core import Blob, apply, get_variable, maybe_builder
from flowjob_core.trace import scope

from flowjob_ops.api._common import build_error
from flowjob_ops.api._initializers import Constant
from flowjob_ops.records.normalization import check_epsilon, check_momentum


__all__ = ["batch_normalization", "batch_normalization_add_relu", "batch_normalization_relu", "layer_norm",
           "layer_norm_grad", "layer_norm_param_grad"]


def _fail(layer: str, message: str) -> Exception:
    return build_error(f"flow.layers.{layer}", message)


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

    beta = variable("beta", beta_initializer, Constant(value=0.0), beta_regularizer,
                    trainable) if center else None
    gamma = variable("gamma", gamma_initializer, Constant(value=1.0), gamma_regularizer,
                     trainable) if scale else None
    moving_mean = variable("moving_mean", moving_mean_initializer, Constant(value=0.0), None, False)
    moving_variance = variable("moving_variance", moving_variance_initializer, Constant(value=1.0),
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
                           initializer=Constant(value=value), trainable=trainable,
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
