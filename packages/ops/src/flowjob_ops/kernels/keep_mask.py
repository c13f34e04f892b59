"""Dropout keep masks drawn as legacy's CPU kernels drew them.

Legacy's ``random_mask_like`` (which ``flow.nn.dropout`` and the fused dropouts used) kept an element when
``std::uniform_real_distribution<float>(0, 1)`` over a ``std::mt19937(seed)`` gave more than ``rate``: one
32-bit draw per element, made a float32 (rounded) and divided by 2^32. numpy's legacy ``RandomState(seed)``
seeds the same Mersenne Twister the same way, so with a seed the masks are legacy's CPU masks bit for bit,
step after step, and every op given one seed draws one sequence. Without a seed the stream starts from the
node's own random generator.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

TWO_32 = np.float32(2.0 ** 32)
BELOW_ONE = np.nextafter(np.float32(1.0), np.float32(0.0))


def keep_mask_source(ctx: Any, shape: tuple[int, ...]) -> Callable[[float], Any]:
    """``draw(rate)``: a host bool array of ``shape``, True where the element is kept (uniform > rate)."""
    seed = ctx.attrs.get("seed")
    if seed is None:
        seed = int(np.random.default_rng().integers(2 ** 32))  # legacy drew a random seed per kernel too
    # the bit generator itself, seeded as RandomState(seed) seeds it: its raw 32-bit draws, three times faster
    # than RandomState.randint
    generator = np.random.MT19937()
    generator.state = np.random.RandomState(int(seed) % 2 ** 32).get_state(legacy=False)
    size = int(np.prod(shape, dtype=np.int64))

    def draw(rate: float) -> Any:
        uniform = generator.random_raw(size).astype(np.float32)
        uniform /= TWO_32
        np.minimum(uniform, BELOW_ONE, out=uniform)  # libstdc++ maps a rounded-up 1.0 just below it
        return (uniform > np.float32(rate)).reshape(shape)

    return draw
