"""Op case of ``random_mask_like`` (legacy v0.4's keep mask of flow.nn.random_mask_like); numpy reference
drawn from legacy's CPU stream. op_cases.py appends ``CASES`` to its table."""
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
    """Legacy's CPU stream, as libstdc++ computes it: std::mt19937(seed) 32-bit draws, each made a float32 and
    divided by 2^32 (std::uniform_real_distribution<float>), kept where they exceed rate."""
    raw = np.random.RandomState(seed).randint(0, 2 ** 32, size=like.size, dtype=np.uint32)
    u = np.minimum(raw.astype(np.float32) / np.float32(2 ** 32), np.nextafter(np.float32(1), np.float32(0)))
    return (u > np.float32(rate)).astype(np.int8).reshape(like.shape)


CASES = [
    OpCase("random_mask_like", random_mask_like_case, reference=random_mask_like_ref, wrt=()),
]
