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

import numpy as np

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
    # array words: every Python int (a word or a constant) as a uint64, since numpy 1 gives a uint64 scalar and a
    # Python int float64; C words keep Python ints, which their operators write as literals
    typed = _same if any(isinstance(w, CWord) for w in (*counter, *key)) else np.uint64
    c0, c1, c2, c3 = (w if hasattr(w, "dtype") else typed(w) for w in counter)
    k0, k1 = (w if hasattr(w, "dtype") else typed(w) for w in key)
    mask, m0, m1, w0, w1, half = (typed(v) for v in (MASK, M0, M1, W0, W1, 32))
    for round_ in range(ROUNDS):
        if round_:
            k0, k1 = let((k0 + w0) & mask), let((k1 + w1) & mask)
        p0, p1 = let(c0 * m0), let(c2 * m1)
        c0, c1, c2, c3 = let((p1 >> half) ^ c1 ^ k0), let(p1 & mask), let((p0 >> half) ^ c3 ^ k1), let(p0 & mask)
    return c0, c1, c2, c3


class CWord:
    """A word of the rounds as C (``unsigned long long``, holding 32 bits): each operator writes the expression,
    ``let`` a local of it into ``lines``, so the rounds' C is written by the same code as their array form."""

    def __init__(self, expression: str, lines: list[str]) -> None:
        self.expression, self.lines = expression, lines

    def _apply(self, other: Any, operator: str) -> "CWord":
        return CWord(f"({self.expression} {operator} {c_operand(other)})", self.lines)

    def __mul__(self, other: Any) -> "CWord":
        return self._apply(other, "*")

    def __add__(self, other: Any) -> "CWord":
        return self._apply(other, "+")

    def __rshift__(self, other: Any) -> "CWord":
        return self._apply(other, ">>")

    def __and__(self, other: Any) -> "CWord":
        return self._apply(other, "&")

    def __xor__(self, other: Any) -> "CWord":
        return self._apply(other, "^")

    __rmul__, __radd__, __rand__, __rxor__ = __mul__, __add__, __and__, __xor__


def c_operand(value: Any) -> str:
    return value.expression if isinstance(value, CWord) else f"{int(value)}ULL"


def philox_c(counter: tuple[Any, Any, Any, Any], key: tuple[Any, Any], out: str = "word") -> str:
    """C statements computing the rounds of ``counter`` under ``key`` (C expressions as strings, or ints) into
    ``unsigned long long <out>0`` to ``<out>3``."""
    lines: list[str] = []

    def let(value: Any) -> Any:
        if not isinstance(value, CWord):
            return value  # a constant (a key word given as an int): folded in Python
        name = f"philox_{len(lines)}"
        lines.append(f"const unsigned long long {name} = {value.expression};")
        return CWord(name, lines)

    words = philox4x32_10(tuple(CWord(f"({c})", lines) if isinstance(c, str) else c for c in counter),
                          tuple(CWord(f"({k})", lines) if isinstance(k, str) else k for k in key), let)
    lines += [f"const unsigned long long {out}{n} = {c_operand(w)};" for n, w in enumerate(words)]
    return "\n".join(lines)


def seed_key(seed: int) -> tuple[int, int]:
    """The key of a seed: its low and high 32 bits (a seed is taken modulo 2**64)."""
    seed %= 1 << 64
    return seed & MASK, seed >> 32
