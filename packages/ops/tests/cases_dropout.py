"""Op case of ``random_mask_like`` (legacy v0.4's keep mask of flow.nn.random_mask_like); numpy reference
drawn from the kernel's stream. op_cases.py appends ``CASES`` to its table."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def random_mask_like_case(draw: Draw) -> Case:
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    like = np.zeros(base._shape(draw, 0, 3, 5), dtype=dtype)  # only the shape is read
    return [like], {"rate": draw(st.sampled_from([0.0, 0.1, 0.5, 0.9])), "seed": draw(st.integers(0, 1000))}


def random_mask_like_ref(like: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """The kernel's stream: float32 uniforms from ``default_rng(seed)``, kept where they exceed rate."""
    u = np.random.default_rng(seed).random(like.shape, dtype=np.float32)
    return (u > np.float32(rate)).astype(np.int8)


CASES = [
    OpCase("random_mask_like", random_mask_like_case, reference=random_mask_like_ref, wrt=()),
]
