"""``flow.nn``'s activations: relu, sigmoid, tanh, gelu and legacy v0.4's piecewise and exponential ones
(leaky_relu, hardtanh, relu6, hardsigmoid, hardswish, elu, selu), mish and swish."""
from __future__ import annotations

from flowjob_core import Blob, apply


__all__ = ["elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "mish", "relu", "relu6", "selu",
           "sigmoid", "swish", "tanh"]


def relu(x: Blob, name: str | None = None) -> Blob:
    """max(x, 0), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Relu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("relu", [x], name=name)


def sigmoid(x: Blob, name: str | None = None) -> Blob:
    """1 / (1 + exp(-x)), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Sigmoid_<n>``.

    Returns:
        A blob like x.
    """
    return apply("sigmoid", [x], name=name)


def tanh(x: Blob, name: str | None = None) -> Blob:
    """tanh(x), elementwise.

    Args:
        x: a floating blob.
        name: the op name; default ``Tanh_<n>``.

    Returns:
        A blob like x.
    """
    return apply("tanh", [x], name=name)


def gelu(x: Blob, name: str | None = None) -> Blob:
    """x * Phi(x) = x/2 (1 + erf(x / sqrt(2))): the exact erf form, not the tanh approximation.

    Args:
        x: a floating blob.
        name: the op name; default ``Gelu_<n>``.

    Returns:
        A blob like x.
    """
    return apply("gelu", [x], name=name)


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


def relu6(x: Blob, name: str | None = None) -> Blob:
    """min(max(x, 0), 6).

    Args:
        x: a floating blob.
        name: the op name; default ``Relu6_<n>``.

    Returns:
        A blob like x.
    """
    return apply("relu6", [x], name=name)


def hardsigmoid(x: Blob, name: str | None = None) -> Blob:
    """relu6(x + 3) / 6, a piecewise-linear sigmoid.

    Args:
        x: a floating blob.
        name: the op name; default ``HardSigmoid_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardsigmoid", [x], name=name)


def hardswish(x: Blob, name: str | None = None) -> Blob:
    """x * relu6(x + 3) / 6.

    Args:
        x: a floating blob.
        name: the op name; default ``HardSwish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("hardswish", [x], name=name)


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


def mish(x: Blob, name: str | None = None) -> Blob:
    """x * tanh(softplus(x)), softplus(x) = log(1 + exp(x)).

    Args:
        x: a floating blob.
        name: the op name; default ``Mish_<n>``.

    Returns:
        A blob like x.
    """
    return apply("mish", [x], name=name)


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
