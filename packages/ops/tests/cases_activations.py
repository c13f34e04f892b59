"""Op cases for the legacy activations (leaky_relu, hardtanh, relu6, hardsigmoid, hardswish, elu, selu,
mish, swish as op ``silu``) and their fused gradient ops, with plain-numpy references.

Inputs keep a gap from each op's kinks (0 for leaky_relu and elu, the clip bounds for hardtanh and
relu6, +-3 for hardsigmoid and hardswish), where the central-difference check would straddle two slopes.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


def _x(draw: Draw, away: tuple[float, ...] = (), low: float = -5.0, high: float = 5.0) -> np.ndarray:
    shape = base._shape(draw)
    return base._away(draw, shape, away, 0.1, low, high) if away else base._array(draw, shape, low, high)


def _with_dy(make: Any) -> Any:
    """A gradient op's case: the forward case's saved value (made by ``make``) and a dy like it."""
    def case(draw: Draw) -> Case:
        (x,), attrs = make(draw)
        return [x, base._array(draw, x.shape)], attrs

    return case


# references ------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def leaky_relu_ref(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * x)


def elu_ref(x: np.ndarray, alpha: float, scale: float) -> np.ndarray:
    return scale * np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


def elu_grad_ref(x: np.ndarray, dy: np.ndarray, alpha: float, scale: float) -> np.ndarray:
    return dy * scale * np.where(x > 0, 1.0, alpha * np.exp(np.minimum(x, 0)))


def hardsigmoid_ref(x: np.ndarray) -> np.ndarray:
    return np.clip(x + 3, 0, 6) / 6


def hardswish_grad_ref(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy * np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, (2 * x + 3) / 6))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def mish_grad_ref(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    t = np.tanh(_softplus(x))
    return dy * (t + x * _sigmoid(x) * (1 - t * t))


def swish_grad_ref(x: np.ndarray, dy: np.ndarray, beta: float) -> np.ndarray:
    s = _sigmoid(beta * x)
    return dy * (s + beta * x * s * (1 - s))


# cases -----------------------------------------------------------------------------
ALPHAS = st.sampled_from([0.0, 0.01, 0.2, 1.5])
BOUNDS = st.sampled_from([(-1.0, 1.0), (-2.5, 0.5), (0.0, 6.0), (1.0, 3.0)])


def leaky_relu_case(draw: Draw) -> Case:
    return [_x(draw, (0.0,))], {"alpha": draw(ALPHAS)}


def hardtanh_case(draw: Draw) -> Case:
    lo, hi = draw(BOUNDS)
    return [_x(draw, (lo, hi))], {"min_val": lo, "max_val": hi}


def hardtanh_grad_case(draw: Draw) -> Case:
    """(y, dy): y is the clipped output, so it also lands exactly on the bounds (no gradient there)."""
    (x,), attrs = hardtanh_case(draw)
    return [np.clip(x, attrs["min_val"], attrs["max_val"]), base._array(draw, x.shape)], attrs


def relu6_case(draw: Draw) -> Case:
    return [_x(draw, (0.0, 6.0), -3.0, 9.0)], {}


def hard_case(draw: Draw) -> Case:
    return [_x(draw, (-3.0, 3.0), -6.0, 6.0)], {}


def elu_case(draw: Draw) -> Case:
    return [_x(draw, (0.0,))], {"alpha": draw(st.sampled_from([1.0, 0.5, 2.0])), "scale": 1.0}


def selu_case(draw: Draw) -> Case:
    scale, alpha = draw(st.sampled_from([(SELU_SCALE, SELU_ALPHA), (1.2, 1.0), (2.0, 0.5)]))
    return [_x(draw, (0.0,))], {"alpha": alpha, "scale": scale}


def mish_case(draw: Draw) -> Case:
    return [_x(draw, low=-8.0, high=8.0)], {}


def swish_case(draw: Draw) -> Case:
    return [_x(draw, low=-6.0, high=6.0)], {"beta": draw(st.sampled_from([1.0, 0.5, 2.0]))}


def prelu_case(draw: Draw) -> Case:
    shape = base._shape(draw, 2, 4)
    # alpha covers x.shape[1:], shared (extent 1) on a drawn subset of those axes
    alpha_shape = tuple(1 if draw(st.booleans()) else d for d in shape[1:])
    return [base._away(draw, shape, (0.0,), 0.1), base._array(draw, alpha_shape, -1.0, 1.0)], {}


def prelu_ref(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, alpha * x)


def prelu_grad_case(draw: Draw) -> Case:
    (x, alpha), attrs = prelu_case(draw)
    return [x, alpha, base._array(draw, x.shape)], attrs


def prelu_grad_ref(x: np.ndarray, alpha: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    negative = x <= 0
    return np.where(negative, alpha * dy, dy), np.where(negative, dy * x, 0.0)


CASES = [
    OpCase("leaky_relu", leaky_relu_case, reference=leaky_relu_ref),
    OpCase("leaky_relu_grad", _with_dy(leaky_relu_case), wrt=(),
           reference=lambda x, dy, alpha: dy * np.where(x > 0, 1.0, alpha)),
    OpCase("hardtanh", hardtanh_case, reference=lambda x, min_val, max_val: np.clip(x, min_val, max_val)),
    OpCase("hardtanh_grad", hardtanh_grad_case, wrt=(),
           reference=lambda y, dy, min_val, max_val: dy * ((y > min_val) & (y < max_val))),
    OpCase("relu6", relu6_case, reference=lambda x: np.clip(x, 0, 6)),
    OpCase("hardsigmoid", hard_case, reference=hardsigmoid_ref),
    OpCase("hardsigmoid_grad", _with_dy(hard_case), wrt=(), reference=lambda x, dy: dy * ((x > -3) & (x < 3)) / 6),
    OpCase("hardswish", hard_case, reference=lambda x: x * hardsigmoid_ref(x)),
    OpCase("hardswish_grad", _with_dy(hard_case), wrt=(), reference=hardswish_grad_ref),
    OpCase("elu", elu_case, reference=elu_ref),
    OpCase("selu", selu_case, reference=elu_ref),
    OpCase("elu_grad", _with_dy(selu_case), wrt=(), reference=elu_grad_ref),
    OpCase("mish", mish_case, reference=lambda x: x * np.tanh(_softplus(x))),
    OpCase("mish_grad", _with_dy(mish_case), wrt=(), reference=mish_grad_ref),
    OpCase("silu", swish_case, reference=lambda x, beta: x * _sigmoid(beta * x)),
    OpCase("silu_grad", _with_dy(swish_case), wrt=(), reference=swish_grad_ref),
    OpCase("prelu", prelu_case, reference=prelu_ref),
    OpCase("prelu_grad", prelu_grad_case, reference=prelu_grad_ref, wrt=()),
]
