"""``flow.nn``'s activations: relu, sigmoid, tanh, gelu and legacy v0.4's piecewise and exponential ones
(leaky_relu, hardtanh, relu6, hardsigmoid, hardswish, elu, selu), mish and swish."""
from __future__ import annotations

from flowjob_core import Blob, apply

from flowjob_ops.api._common import unary_function


__all__ = ["elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "mish", "relu", "relu6", "selu",
           "sigmoid", "swish", "tanh"]


relu = unary_function("relu", __name__)


sigmoid = unary_function("sigmoid", __name__)


tanh = unary_function("tanh", __name__)


gelu = unary_function("gelu", __name__)


def leaky_relu(x: Blob, alpha: float = 0.2, name: str | None = None) -> Blob:
    """x where x > 0, ``alpha * x`` elsewhere.

    Args:
        x: a floating blob.
        alpha: the slope below zero.
        name: the op name; default ``LeakyRelu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("leaky_relu", [x], {"alpha": alpha}, name=name)


def hardtanh(x: Blob, min_val: float = -1.0, max_val: float = 1.0, name: str | None = None) -> Blob:
    """x clipped to ``[min_val, max_val]``; the gradient passes strictly inside.

    Args:
        x: a floating blob.
        min_val: the lower bound.
        max_val: the upper bound, above min_val.
        name: the op name; default ``Hardtanh_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardtanh", [x], {"min_val": min_val, "max_val": max_val}, name=name)


relu6 = unary_function("relu6", __name__)


hardsigmoid = unary_function("hardsigmoid", __name__)


hardswish = unary_function("hardswish", __name__)


def elu(x: Blob, alpha: float = 1.0, name: str | None = None) -> Blob:
    """x where x > 0, ``alpha * (exp(x) - 1)`` elsewhere.

    Args:
        x: a floating blob.
        alpha: the saturation value below zero.
        name: the op name; default ``Elu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("elu", [x], {"alpha": alpha, "scale": 1.0}, name=name)


def selu(x: Blob, scale: float = 1.0507009873554805, alpha: float = 1.6732632423543772,
         name: str | None = None) -> Blob:
    """``scale * elu(x, alpha)``; the defaults are the self-normalising constants.

    Args:
        x: a floating blob.
        scale: the factor on both branches.
        alpha: the saturation value of the elu below zero.
        name: the op name; default ``Selu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("selu", [x], {"alpha": alpha, "scale": scale}, name=name)


mish = unary_function("mish", __name__)


def swish(x: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """x * sigmoid(beta * x) (SiLU when beta = 1); the op type is ``silu``.

    Args:
        x: a floating blob.
        beta: the factor inside the sigmoid.
        name: the op name; default ``Swish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("silu", [x], {"beta": beta}, name=name)
