"""``flow.nn``'s normalizations with statistics and parameters given or computed: moments,
batch_normalization, layer_norm, and legacy v0.4's GroupNorm and InstanceNorm1d/2d/3d, composed from
existing ops under node names ``<name>_<part>`` (values and gradients are those of the parts)."""
from __future__ import annotations

import math
from typing import Any, Sequence

from flowjob_core import Blob, apply, get_variable

from flowjob_ops.api._common import build_error, floating_blob, op_name, positive_int, real_number
from flowjob_ops.api._initializers import Constant
from flowjob_ops.records.normalization import check_epsilon


__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "batch_normalization", "layer_norm",
           "moments"]


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


# legacy v0.4's group and instance norms ------------------------------------------------------------
def _affine(x: Blob, normalized: Blob, channels: int, node: str) -> Blob:
    """gamma * normalized + beta with trainable (1, C, 1) variables ``<node>_gamma`` (ones) and ``<node>_beta``."""
    gamma = get_variable(f"{node}_gamma", shape=(1, channels, 1), dtype=x.dtype,
                         initializer=Constant(value=1.0), trainable=True)
    beta = get_variable(f"{node}_beta", shape=(1, channels, 1), dtype=x.dtype,
                        initializer=Constant(value=0.0), trainable=True)
    return apply("add", [apply("multiply", [gamma, normalized], name=f"{node}_scale"), beta], name=f"{node}_shift")


def _normalize(x: Blob, eps: float, node: str) -> Blob:
    """(x - mean) / sqrt(variance + eps) over the last axis of a 3-D blob."""
    mean, variance = moments(x, [2], keepdims=True, name=f"{node}_moments")
    centered = apply("subtract", [x, mean], name=f"{node}_center")
    std = apply("sqrt", [apply("scalar_add", [variance], {"scalar": eps}, name=f"{node}_add_eps")], name=f"{node}_std")
    return apply("divide", [centered, std], name=f"{node}_normalize")


def _check_norm(what: str, x: Any, eps: Any, affine: Any) -> float:
    floating_blob(what, "x", x)
    if not isinstance(affine, bool):
        raise build_error(what, f"affine must be a bool, got {affine!r}")
    eps = real_number(what, "eps", eps)
    if eps < 0:
        raise build_error(what, f"eps must not be negative, got {eps!r}")
    return eps


def GroupNorm(x: Blob, num_groups: int = 32, eps: float = 1e-05, affine: bool = True,  # noqa: N802
              name: str | None = None) -> Blob:
    """Normalizes each sample's channel groups to zero mean and unit variance (over the group's channels
    and all spatial positions), then scales and shifts per channel when ``affine``.

    Args:
        x: a floating (N, C, ...) blob of rank >= 3.
        num_groups: how many groups the C channels form; it must divide C.
        eps: added to the variance.
        affine: learn a per-channel scale ``<name>_gamma`` (ones) and shift ``<name>_beta`` (zeros).
        name: the node and variable name prefix; default ``GroupNorm_<n>``.
    """
    what = "flow.nn.GroupNorm"
    eps = _check_norm(what, x, eps, affine)
    if len(x.shape) < 3:
        raise build_error(what, f"x must have rank >= 3 (N, C, ...), got shape {tuple(x.shape)}")
    num_groups = positive_int(what, "num_groups", num_groups)
    batch, channels = x.shape[0], x.shape[1]
    if channels % num_groups:
        raise build_error(what, f"num_groups {num_groups} must divide the {channels} channels of x")
    node = op_name(name, "GroupNorm")
    grouped = apply("reshape", [x], {"shape": (batch, num_groups, -1)}, name=f"{node}_reshape_groups")
    normalized = apply("reshape", [_normalize(grouped, eps, node)], {"shape": (batch, channels, -1)},
                                   name=f"{node}_reshape_channels")
    if affine:
        normalized = _affine(x, normalized, channels, node)
    return apply("reshape", [normalized], {"shape": tuple(x.shape)}, name=f"{node}_reshape_back")


def _instance_norm(what: str, rank: int, x: Blob, eps: Any, affine: Any, name: str | None, prefix: str) -> Blob:
    eps = _check_norm(what, x, eps, affine)
    if len(x.shape) != rank:
        raise build_error(what, f"x must be a {rank}-D (N, C, ...) blob, got shape {tuple(x.shape)}")
    node = op_name(name, prefix)
    flat = x if rank == 3 else apply("reshape", [x], {"shape": (x.shape[0], x.shape[1], -1)},
                                     name=f"{node}_reshape_1d")
    out = _normalize(flat, eps, node)
    if affine:
        out = _affine(x, out, x.shape[1], node)
    return out if rank == 3 else apply("reshape", [out], {"shape": tuple(x.shape)}, name=f"{node}_reshape_back")


def InstanceNorm1d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """Normalizes each sample's channels over their length, then scales and shifts per channel when ``affine``.

    Args:
        x: a floating (N, C, L) blob.
        eps: added to the variance.
        affine: learn a per-channel scale ``<name>_gamma`` (ones) and shift ``<name>_beta`` (zeros).
        name: the node and variable name prefix; default ``InstanceNorm1D_<n>``.
    """
    return _instance_norm("flow.nn.InstanceNorm1d", 3, x, eps, affine, name, "InstanceNorm1D")


def InstanceNorm2d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """InstanceNorm1d over each channel's H x W positions of a floating (N, C, H, W) blob."""
    return _instance_norm("flow.nn.InstanceNorm2d", 4, x, eps, affine, name, "InstanceNorm2D")


def InstanceNorm3d(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:  # noqa: N802
    """InstanceNorm1d over each channel's D x H x W positions of a floating (N, C, D, H, W) blob."""
    return _instance_norm("flow.nn.InstanceNorm3d", 5, x, eps, affine, name, "InstanceNorm3D")
