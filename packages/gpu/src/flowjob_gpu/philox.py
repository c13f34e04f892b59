"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; Random123's
``philox4x32_10``): a counter-based generator, so a draw is a pure function of (counter, key) and a device
kernel can draw any element without a stream state to carry from one call to the next.

The rounds are written once, over anything with Python's integer operators: xp arrays of ``uint64`` holding
32-bit words (numpy, CuPy, the emulated CuPy: the gpu backend's array kernels) or ``c_words.CWord``, which
writes them as C for a CuPy ``ElementwiseKernel``. ``let`` names a value that is used twice (a C local; the
identity on arrays).
"""
from __future__ import annotations

from typing import Any, Callable

MASK = 0xFFFFFFFF
M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key schedule's Weyl constants
ROUNDS = 10


def _same(value: Any) -> Any:
    return value


def philox4x32_10(counter: tuple[Any, Any, Any, Any], key: tuple[Any, Any],
                  let: Callable[[Any], Any] = _same) -> tuple[Any, Any, Any, Any]:
    """The four 32-bit output words of the counter's four words under the key's two (each a 32-bit value
    held in 64 bits: the products of two words are exact)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_ in range(ROUNDS):
        if round_:
            k0, k1 = let((k0 + W0) & MASK), let((k1 + W1) & MASK)
        p0, p1 = let(c0 * M0), let(c2 * M1)
        c0, c1, c2, c3 = let((p1 >> 32) ^ c1 ^ k0), let(p1 & MASK), let((p0 >> 32) ^ c3 ^ k1), let(p0 & MASK)
    return c0, c1, c2, c3


def seed_key(seed: int) -> tuple[int, int]:
    """The key of a seed: its low and high 32 bits (a seed is taken modulo 2**64)."""
    seed %= 1 << 64
    return seed & MASK, seed >> 32
