"""``flow.nn.init``: legacy v0.4's in-place initialization of a tensor's values.

In legacy each function set a tensor's values by an initializer conf (``flow.random_uniform_initializer``,
``flow.kaiming_initializer``, ...), through the tensor's own method (``tensor.uniform_(a, b)``). Here it
takes what a lazy program holds outside a job body:

- an object with that method (an eager tensor or parameter): the method is called, as legacy did;
- a session variable (``flow.get_all_variables()["w"]``): the variable is given a fresh draw of the initializer
  for its shape and dtype, as ``flow.load_variables`` would assign it;
- a numpy array: filled in place.

A variable blob inside a job body takes its initializer from ``flow.get_variable(initializer=...)`` instead (the
``flow.*_initializer`` functions, which these mirror): passing one here is an error saying so.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from flowjob_core import Blob, FlowjobError
from flowjob_core.api.model_io import VariableBlob, load_variables

from flowjob_ops.api import _initializers as inits

__all__ = ["calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_", "uniform_",
           "xavier_normal_", "xavier_uniform_", "zeros_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (legacy's table): 1 for linear layers and sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope ``param``, default 0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Real) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"flow.nn.init.calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"flow.nn.init.calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _init(what: str, tensor: Any, method: str, initializer: inits.Initializer, *args: Any, **kwargs: Any) -> Any:
    """Set ``tensor``'s values for the public function ``what``; ``method`` is the tensor method legacy called."""
    own = getattr(tensor, method, None)
    if callable(own):
        return own(*args, **kwargs)
    if isinstance(tensor, VariableBlob):
        load_variables({tensor.name: initializer(tensor.shape, tensor.dtype)}, ignore_mismatch=False)
        return tensor
    if isinstance(tensor, np.ndarray):
        tensor[...] = initializer(tensor.shape, tensor.dtype)
        return tensor
    if isinstance(tensor, Blob):
        raise FlowjobError(f"flow.nn.init.{what}: {tensor.lbn!r} is a blob of a job being traced; give the "
                           f"variable its initializer in flow.get_variable(..., initializer=...) (flow.*_initializer)")
    raise FlowjobError(f"flow.nn.init.{what} takes a session variable (flow.get_all_variables()[name]), a numpy "
                       f"array or a tensor with a {method}() method, got {type(tensor).__name__}")


def uniform_(tensor: Any, a: float = 0.0, b: float = 1.0) -> Any:
    """Values uniform in [a, b)."""
    return _init("uniform_", tensor, "uniform_", inits.uniform(a, b), a, b)


def normal_(tensor: Any, mean: float = 0.0, std: float = 1.0) -> Any:
    """Values from Normal(mean, std)."""
    return _init("normal_", tensor, "normal_", inits.RandomNormal(mean=mean, stddev=std), mean, std)


def _gain_one(gain: float, what: str) -> None:
    if gain != 1.0:  # legacy asserted it too
        raise ValueError(f"flow.nn.init.{what}: only gain == 1.0 is supported, got {gain!r}")


def xavier_uniform_(tensor: Any, gain: float = 1.0, *, data_format: str = "NCHW") -> Any:
    """Glorot uniform: U(-sqrt(6 / (fan_in + fan_out)), +...) (``flow.xavier_uniform_initializer``)."""
    _gain_one(gain, "xavier_uniform_")
    initializer = inits.variance_scaling(1.0, "fan_avg", "random_uniform", data_format)
    return _init("xavier_uniform_", tensor, "xavier_uniform_", initializer, gain, data_format=data_format)


def xavier_normal_(tensor: Any, gain: float = 1.0, *, data_format: str = "NCHW") -> Any:
    """Glorot normal: N(0, 2 / (fan_in + fan_out)) (``flow.xavier_normal_initializer``)."""
    _gain_one(gain, "xavier_normal_")
    initializer = inits.variance_scaling(1.0, "fan_avg", "random_normal", data_format)
    return _init("xavier_normal_", tensor, "xavier_normal_", initializer, gain, data_format=data_format)


def kaiming_uniform_(tensor: Any, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *,
                     data_format: str = "NCHW") -> Any:
    """He uniform: bound sqrt(3) * gain / sqrt(fan) (``flow.kaiming_initializer``, negative slope ``a``)."""
    initializer = inits.kaiming("random_uniform", mode, nonlinearity, a, data_format, None)
    return _init("kaiming_uniform_", tensor, "kaiming_uniform_", initializer, a, mode, nonlinearity,
                 data_format=data_format)


def kaiming_normal_(tensor: Any, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *,
                    data_format: str = "NCHW") -> Any:
    """He normal: std gain / sqrt(fan) (``flow.kaiming_initializer``, negative slope ``a``)."""
    initializer = inits.kaiming("random_normal", mode, nonlinearity, a, data_format, None)
    return _init("kaiming_normal_", tensor, "kaiming_normal_", initializer, a, mode, nonlinearity,
                 data_format=data_format)


def constant_(tensor: Any, val: float) -> Any:
    """Every value ``val``."""
    return _init("constant_", tensor, "fill_", inits.Constant(value=val), val)


def ones_(tensor: Any) -> Any:
    """Every value 1."""
    return _init("ones_", tensor, "fill_", inits.Constant(value=1.0), 1)


def zeros_(tensor: Any) -> Any:
    """Every value 0."""
    return _init("zeros_", tensor, "fill_", inits.Constant(value=0.0), 0)
