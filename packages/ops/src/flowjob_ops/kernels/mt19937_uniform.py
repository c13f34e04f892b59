"""Legacy's CPU uniform stream: ``std::uniform_real_distribution<float>`` over a ``std::mt19937(seed)``.

libstdc++ turns one 32-bit draw into a float32 in [0, 1) (``generate_canonical``: the draw made a float32,
rounded, divided by 2^32, a rounded-up 1.0 mapped just below it). numpy's legacy ``RandomState(seed)`` seeds
the same Mersenne Twister the same way, so with a seed the draws are legacy's CPU draws bit for bit, step
after step. Without a seed the stream starts from a fresh random seed, as legacy drew one per kernel.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

TWO_32 = np.float32(2.0 ** 32)
BELOW_ONE = np.nextafter(np.float32(1.0), np.float32(0.0))


def canonical_source(seed: Any, size: int) -> Callable[[], np.ndarray]:
    """``draw()``: the next ``size`` host float32 values in [0, 1) of the stream seeded with ``seed`` (None:
    a fresh random seed)."""
    if seed is None:
        seed = int(np.random.default_rng().integers(2 ** 32))
    # the bit generator itself, seeded as RandomState(seed) seeds it: its raw 32-bit draws, three times faster
    # than RandomState.randint
    generator = np.random.MT19937()
    generator.state = np.random.RandomState(int(seed) % 2 ** 32).get_state(legacy=False)

    def draw() -> np.ndarray:
        uniform = generator.random_raw(size).astype(np.float32)
        uniform /= TWO_32
        return np.minimum(uniform, BELOW_ONE, out=uniform)

    return draw
