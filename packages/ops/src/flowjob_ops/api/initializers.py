"""Variable initializers with legacy OneFlow names and arguments (``flow.*_initializer``); each makes an
initializer value of ``api._initializers`` (the contract of ``flow.get_variable``, the fans, the seeding)."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_ops.api._initializers import (
    Constant, Initializer, RandomNormal, TruncatedNormal, kaiming, uniform, variance_scaling)


__all__ = ["Initializer", "constant_initializer", "empty_initializer", "glorot_normal_initializer",
           "glorot_uniform_initializer", "kaiming_initializer", "ones_initializer", "random_normal_initializer",
           "random_uniform_initializer", "truncated_normal", "truncated_normal_initializer",
           "variance_scaling_initializer", "xavier_normal_initializer", "xavier_uniform_initializer",
           "zeros_initializer"]


def constant_initializer(value: float = 0, dtype: Any = None) -> Initializer:
    """Every element ``value``.

    Args:
        value: the fill value.
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return Constant(value=value)


def zeros_initializer(dtype: Any = None) -> Initializer:
    """Zeros.

    Args:
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return Constant(value=0.0)


def ones_initializer(dtype: Any = None) -> Initializer:
    """Ones.

    Args:
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return Constant(value=1.0)


def empty_initializer(dtype: Any = None) -> Initializer:
    """No particular initial value, for a variable a checkpoint or ``flow.load_variables`` fills.

    Legacy left the variable's memory as it was; here it starts at zeros, one of the values that
    memory could have held, so a job reading it before a load is at least repeatable.

    Args:
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return Constant(value=0.0)


def random_uniform_initializer(minval: float = 0, maxval: float = 1, dtype: Any = None) -> Initializer:
    """Uniform in [minval, maxval) (integers in that range for integer variables).

    Args:
        minval: the lower bound.
        maxval: the upper bound.
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return uniform(minval, maxval)


def random_normal_initializer(mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                              dtype: Any = None) -> Initializer:
    """Normal(mean, stddev).

    Args:
        mean: the mean.
        stddev: the standard deviation.
        seed: draw from this seed instead of the session's per-variable stream.
        dtype: ignored (the variable's dtype decides).

    Returns:
        An initializer.
    """
    return RandomNormal(mean=mean, stddev=stddev, seed=seed)


def truncated_normal_initializer(mean: float = 0.0, stddev: float = 1.0) -> Initializer:
    """Normal(mean, stddev) redrawn outside mean +- 2 stddev (legacy argument order: mean first).

    Args:
        mean: the mean.
        stddev: the standard deviation before truncation.

    Returns:
        An initializer.
    """
    return TruncatedNormal(mean=mean, stddev=stddev)


def truncated_normal(stddev: float = 1.0, mean: float = 0.0) -> Initializer:
    """``flow.truncated_normal(0.1)``: like truncated_normal_initializer, but stddev comes first (legacy).

    Args:
        stddev: the standard deviation before truncation.
        mean: the mean.

    Returns:
        An initializer.
    """
    return TruncatedNormal(mean=mean, stddev=stddev)


def variance_scaling_initializer(scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                                 data_format: str = "") -> Initializer:
    """Values with variance scale / fan (fan by ``mode``).

    Args:
        scale: the variance scale, positive.
        mode: "fan_in", "fan_out" or "fan_avg".
        distribution: "truncated_normal", "random_normal" or "random_uniform".
        data_format: "NCHW"/"channels_first", "NHWC"/"channels_last" or "" (conv weights read as NCHW).

    Returns:
        An initializer.
    """
    return variance_scaling(scale, mode, distribution, data_format)


def xavier_uniform_initializer(data_format: str = "") -> Initializer:
    """Glorot uniform: variance scaling with scale 1, fan_avg, uniform.

    Args:
        data_format: the weight layout for conv weights (see variance_scaling_initializer).

    Returns:
        An initializer.
    """
    return variance_scaling_initializer(1.0, "fan_avg", "random_uniform", data_format)


def xavier_normal_initializer(data_format: str = "") -> Initializer:
    """Glorot normal: variance scaling with scale 1, fan_avg, normal.

    Args:
        data_format: the weight layout for conv weights (see variance_scaling_initializer).

    Returns:
        An initializer.
    """
    return variance_scaling_initializer(1.0, "fan_avg", "random_normal", data_format)


glorot_uniform_initializer = xavier_uniform_initializer


glorot_normal_initializer = xavier_normal_initializer


def kaiming_initializer(shape: Sequence[int] | str | None = None, distribution: str = "random_normal",
                        mode: str = "fan_in", nonlinearity: str | None = "leaky_relu", negative_slope: float = 0.0,
                        data_format: str = "NCHW") -> Initializer:
    """He initialization: std = gain(nonlinearity) / sqrt(fan).

    Legacy took the weight ``shape`` first and fixed the fan from it; here it may be left out
    (the fan then comes from the variable's shape), and a first argument that is a string is
    read as ``distribution``.

    Args:
        shape: the weight shape the fan is computed from, or None.
        distribution: "random_normal" or "random_uniform".
        mode: "fan_in", "fan_out" or "fan_avg".
        nonlinearity: None, "linear", "sigmoid", "tanh", "relu" or "leaky_relu".
        negative_slope: the leaky_relu slope.
        data_format: "NCHW"/"channels_first" or "NHWC"/"channels_last".

    Returns:
        An initializer.
    """
    if isinstance(shape, str):
        shape, distribution = None, shape
    return kaiming(distribution, mode, nonlinearity, negative_slope, data_format,
                   None if shape is None else tuple(int(d) for d in shape))
