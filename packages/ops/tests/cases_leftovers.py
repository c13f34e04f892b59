"""Op cases for the leftover legacy names: ``prelu`` and its gradient op, ``random_mask_like``; numpy references.

prelu inputs keep a gap from 0, the kink where the slope switches between 1 and alpha.
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


def random_mask_like_case(draw: Draw) -> Case:
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    like = np.zeros(base._shape(draw, 0, 3, 5), dtype=dtype)  # only the shape is read
    return [like], {"rate": draw(st.sampled_from([0.0, 0.1, 0.5, 0.9])), "seed": draw(st.integers(0, 1000))}


def random_mask_like_ref(like: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """The kernel's stream: float32 uniforms from ``default_rng(seed)``, kept where they exceed rate."""
    u = np.random.default_rng(seed).random(like.shape, dtype=np.float32)
    return (u > np.float32(rate)).astype(np.int8)


CASES = [
    OpCase("prelu", prelu_case, reference=prelu_ref),
    OpCase("prelu_grad", prelu_grad_case, reference=prelu_grad_ref, wrt=()),
    OpCase("random_mask_like", random_mask_like_case, reference=random_mask_like_ref, wrt=()),
]
