"""The normal CDF for gelu, written against ``xp`` (numpy has no erf, cupy's lives elsewhere).

For z >= 0, ``erfc(z) = t * exp(-z**2 + g(t))`` with ``t = 2 / (2 + z)``, where ``g`` is smooth on
t in (0, 1] and is evaluated as a Chebyshev series (the form of Numerical Recipes' ``erfccheb``).
The coefficients are not copied from a table: they are interpolated once from the standard
library's ``math.erfc`` (an asymptotic series where erfc underflows). Degree 24 gives erf to
about 1e-15 absolute in float64; float32 uses degree 12 (about 1e-9, below its epsilon).
Because the result is accurate to rounding, the exact derivative ``Phi(x) + x * phi(x)`` is
a consistent gradient of the implemented gelu.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev

_LOG_2_SQRT_PI = math.log(2.0 * math.sqrt(math.pi))


def _g(s: float) -> float:
    """g at Chebyshev abscissa s = 2t - 1: ln(erfc(z) / t) + z**2."""
    t = (s + 1.0) / 2.0
    if t <= 0.0:
        return -_LOG_2_SQRT_PI  # the limit z -> inf
    z = 2.0 / t - 2.0
    if z < 25.0:
        return math.log(math.erfc(z) / t) + z * z
    # erfc underflows soon after: erfc(z) ~ exp(-z^2) / (z sqrt(pi)) * (1 - 1/(2z^2) + 3/(4z^4) - ...)
    term = total = 1.0
    for n in range(1, 12):
        term *= -(2 * n - 1) / (2.0 * z * z)
        total += term
    return -math.log(z * math.sqrt(math.pi)) + math.log(total) - math.log(t)


@functools.cache
def chebyshev_coefficients(degree: int) -> tuple[float, ...]:
    return tuple(float(c) for c in chebyshev.chebinterpolate(np.vectorize(_g), degree))


def degree_for(dtype: np.dtype) -> int:
    return 24 if np.dtype(dtype).itemsize >= 8 else 12


class NormalCdf:
    """``Phi(x)`` (and ``phi(x)``) for a fixed shape and dtype, with scratch buffers allocated once."""

    def __init__(self, xp: Any, shape: tuple[int, ...], dtype: Any) -> None:
        self.xp = xp
        self.dtype = dt = np.dtype(dtype)
        self.coefficients = [dt.type(c) for c in chebyshev_coefficients(degree_for(dt))]
        self._z, self._t, self._s2 = (xp.empty(shape, dtype=dt) for _ in range(3))
        self._ring = [xp.empty(shape, dtype=dt) for _ in range(3)]  # Clenshaw's b_k, b_k+1, b_k+2

    def _erfc_of_abs(self, x: Any) -> Any:
        """erfc(|x| / sqrt(2)) into one of the ring buffers, which is returned."""
        xp, dt, z, t, s2 = self.xp, self.dtype.type, self._z, self._t, self._s2
        xp.abs(x, out=z)
        xp.multiply(z, dt(1.0 / math.sqrt(2.0)), out=z)
        xp.add(z, dt(2.0), out=t)
        xp.divide(dt(2.0), t, out=t)  # t = 2 / (2 + z)
        xp.multiply(t, dt(4.0), out=s2)
        xp.subtract(s2, dt(2.0), out=s2)  # 2s, with s = 2t - 1 in [-1, 1]
        b1, b2, new = self._ring
        b1.fill(0)
        b2.fill(0)
        for c in self.coefficients[:0:-1]:  # b_k = 2s b_k+1 - b_k+2 + c_k
            xp.multiply(s2, b1, out=new)
            xp.subtract(new, b2, out=new)
            xp.add(new, c, out=new)
            b1, b2, new = new, b1, b2
        xp.multiply(s2, b1, out=new)  # g = s b_1 - b_2 + c_0
        xp.multiply(new, dt(0.5), out=new)
        xp.subtract(new, b2, out=new)
        xp.add(new, self.coefficients[0], out=new)
        xp.multiply(z, z, out=b1)
        xp.subtract(new, b1, out=new)
        xp.exp(new, out=new)
        xp.multiply(new, t, out=new)
        return new

    def cdf(self, x: Any, out: Any) -> Any:
        """Phi(x) = erfc(-x / sqrt(2)) / 2 into ``out`` (which must not be ``x``)."""
        xp, dt = self.xp, self.dtype.type
        e = self._erfc_of_abs(x)
        xp.greater_equal(x, 0, out=self._t)  # Phi = e/2 for x < 0, 1 - e/2 for x >= 0
        xp.multiply(e, dt(0.5), out=out)
        xp.subtract(dt(1.0), e, out=self._s2)
        xp.multiply(self._s2, self._t, out=self._s2)
        xp.add(out, self._s2, out=out)
        return out

    def pdf(self, x: Any, out: Any) -> Any:
        """phi(x) = exp(-x**2 / 2) / sqrt(2 pi) into ``out``."""
        xp, dt = self.xp, self.dtype.type
        xp.multiply(x, x, out=out)
        xp.multiply(out, dt(-0.5), out=out)
        xp.exp(out, out=out)
        xp.multiply(out, dt(1.0 / math.sqrt(2.0 * math.pi)), out=out)
        return out
