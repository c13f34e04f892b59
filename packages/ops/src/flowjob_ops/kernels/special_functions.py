"""erf, erfc, lgamma and digamma written against ``xp`` (numpy has none of them as ufuncs; the
package takes no scipy dependency, and a Python-level ``math.erf`` loop would not run on CuPy).

Accuracy, by construction rather than by a copied table:

* ``erfc(|x|)`` is the Chebyshev form of ``flowjob_ops.kernels.normal_cdf`` (``erfc(z) = t exp(-z^2 +
  g(t))``, ``t = 2 / (2 + z)``, coefficients interpolated from ``math.erfc``): about 1e-15 in
  float64, relative even in the tail. ``erf`` for ``|x| < 1/2`` is its Maclaurin series instead,
  since ``1 - erfc(x)`` would lose the relative accuracy of small results.
* ``lgamma`` and ``digamma`` shift an argument below ``SHIFT`` up by ``SHIFT`` with the recurrences
  ``lgamma(u) = lgamma(u + n) - log(u (u+1) ... (u+n-1))``, ``psi(u) = psi(u + n) - sum 1/(u+k)``
  and then use their asymptotic (Stirling) series, whose next term at ``u >= 10`` is below 1e-16;
  arguments ``x <= 0`` use the reflection formulas. Near the roots of lgamma (x = 1, 2) the error
  is absolute (about 1e-15 in float64), not relative. Poles (0, -1, -2, ...) give +inf (lgamma)
  and non-finite digamma, as C's ``lgamma`` does. float32 and float16 are evaluated in float64.

Each helper allocates its scratch once, for one shape and dtype (kernels are built once per node).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from flowjob_ops.kernels.normal_cdf import chebyshev_coefficients, degree_for

SHIFT = 10
_SMALL_ERF = 0.5  # below: the Maclaurin series of erf
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
# Stirling's series for lgamma(y) - ((y - 1/2) log y - y + log(2 pi)/2), in powers of 1/y:
# B_2k / (2k (2k - 1)) for k = 1..7 (Bernoulli numbers as exact fractions)
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
_LGAMMA_SERIES = tuple(b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI, start=1))
# and for psi(y) - (log y - 1/(2y)): -B_2k / (2k y^2k)
_DIGAMMA_SERIES = tuple(-b / (2 * k) for k, b in enumerate(_BERNOULLI, start=1))


def _erf_series(dtype: np.dtype) -> tuple[float, ...]:
    """Maclaurin coefficients of erf(x) / x in powers of x^2, enough for |x| < 1/2 in ``dtype``."""
    terms = 13 if dtype.itemsize >= 8 else 7
    return tuple(_TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(terms))


class ErrorFunctions:
    """erf and erfc for one shape and dtype, into a caller's ``out`` (never one of the inputs)."""

    def __init__(self, xp: Any, shape: tuple[int, ...], dtype: Any) -> None:
        self.xp = xp
        self.dt = np.dtype(dtype)
        cast = self.dt.type
        self.chebyshev = [cast(c) for c in chebyshev_coefficients(degree_for(self.dt))]
        self.series = [cast(c) for c in _erf_series(self.dt)]
        self._z, self._t, self._s2, self._b1, self._b2, self._b3 = (xp.empty(shape, dtype=self.dt) for _ in range(6))
        self._mask = xp.empty(shape, dtype=bool)

    def _erfc_of_abs(self, x: Any) -> Any:
        """erfc(|x|) into a scratch buffer, which is returned; ``self._z`` keeps |x|."""
        xp, c, z, t, s2 = self.xp, self.dt.type, self._z, self._t, self._s2
        xp.abs(x, out=z)
        xp.add(z, c(2.0), out=t)
        xp.divide(c(2.0), t, out=t)  # t = 2 / (2 + z) in (0, 1]
        xp.multiply(t, c(4.0), out=s2)
        xp.subtract(s2, c(2.0), out=s2)  # 2s, s = 2t - 1 the Chebyshev variable
        b1, b2, new = self._b1, self._b2, self._b3
        b1.fill(0)
        b2.fill(0)
        for coefficient in self.chebyshev[:0:-1]:  # Clenshaw: b_k = 2s b_k+1 - b_k+2 + c_k
            xp.multiply(s2, b1, out=new)
            xp.subtract(new, b2, out=new)
            xp.add(new, coefficient, out=new)
            b1, b2, new = new, b1, b2
        xp.multiply(s2, b1, out=new)  # g = s b_1 - b_2 + c_0
        xp.multiply(new, c(0.5), out=new)
        xp.subtract(new, b2, out=new)
        xp.add(new, self.chebyshev[0], out=new)
        xp.multiply(z, z, out=b1)
        xp.subtract(new, b1, out=new)
        xp.exp(new, out=new)
        return xp.multiply(new, t, out=new)

    def erf(self, x: Any, out: Any) -> Any:
        xp, c = self.xp, self.dt.type
        e = self._erfc_of_abs(x)
        xp.subtract(c(1.0), e, out=out)
        xp.copysign(out, x, out=out)
        # |x| < 1/2: x * P(x^2), free of the cancellation in 1 - erfc
        x2, acc = self._t, self._s2
        xp.multiply(x, x, out=x2)
        acc.fill(self.series[-1])
        for coefficient in self.series[-2::-1]:
            xp.multiply(acc, x2, out=acc)
            xp.add(acc, coefficient, out=acc)
        xp.multiply(acc, x, out=acc)
        xp.less(self._z, c(_SMALL_ERF), out=self._mask)
        xp.copyto(out, acc, where=self._mask)
        return out

    def erfc(self, x: Any, out: Any) -> Any:
        xp, c = self.xp, self.dt.type
        e = self._erfc_of_abs(x)
        xp.copyto(out, e)
        xp.subtract(c(2.0), e, out=e)  # erfc(-z) = 2 - erfc(z)
        xp.less(x, c(0.0), out=self._mask)
        xp.copyto(out, e, where=self._mask)
        return out


class GammaFunctions:
    """lgamma and digamma for one shape and dtype, into a caller's ``out`` (never one of the inputs)."""

    def __init__(self, xp: Any, shape: tuple[int, ...], dtype: Any) -> None:
        self.xp = xp
        # narrower floats are evaluated in float64: the shift and Stirling's leading terms are ~20
        # where lgamma is near 0 (x = 1, 2), which would cost float32 a few units of 1e-6 absolute
        self.dt = np.dtype(np.float64) if np.dtype(dtype).itemsize < 8 else np.dtype(dtype)
        self._wide = None if self.dt == np.dtype(dtype) else (xp.empty(shape, dtype=self.dt),
                                                               xp.empty(shape, dtype=self.dt))
        self._u, self._y, self._acc, self._tmp, self._r = (xp.empty(shape, dtype=self.dt) for _ in range(5))
        self._reflect, self._shifted = xp.empty(shape, dtype=bool), xp.empty(shape, dtype=bool)

    def _prepare(self, x: Any) -> None:
        """u = x for x > 0, else 1 - x (the reflection's argument, >= 1); y = u shifted up by SHIFT
        where u < SHIFT (``_shifted``); r = x - rint(x)."""
        xp, c = self.xp, self.dt.type
        xp.less_equal(x, c(0.0), out=self._reflect)
        xp.subtract(c(1.0), x, out=self._u)
        xp.copyto(self._u, x, where=~self._reflect)
        xp.less(self._u, c(SHIFT), out=self._shifted)
        xp.add(self._u, c(SHIFT), out=self._y)
        xp.copyto(self._y, self._u, where=~self._shifted)
        xp.rint(x, out=self._r)
        xp.subtract(x, self._r, out=self._r)  # exact; sin(pi x) and tan(pi x) follow from r in [-1/2, 1/2]
        # elements not reflected get a harmless r, so the unused branch divides by no zero (no numpy warning)
        xp.copyto(self._r, self.dt.type(0.25), where=~self._reflect)

    def _series(self, coefficients: tuple[float, ...], power: Any, out: Any) -> Any:
        """sum_k coefficients[k] * power**(k+1), by Horner, into ``out``."""
        xp, c = self.xp, self.dt.type
        out.fill(c(coefficients[-1]))
        for coefficient in coefficients[-2::-1]:
            xp.multiply(out, power, out=out)
            xp.add(out, c(coefficient), out=out)
        return xp.multiply(out, power, out=out)

    def _widened(self, method: Any, x: Any, out: Any) -> Any:
        if self._wide is None:
            return method(x, out)
        wide_x, wide_out = self._wide
        self.xp.copyto(wide_x, x)
        method(wide_x, wide_out)
        self.xp.copyto(out, wide_out)
        return out

    def lgamma(self, x: Any, out: Any) -> Any:
        return self._widened(self._lgamma, x, out)

    def digamma(self, x: Any, out: Any) -> Any:
        return self._widened(self._digamma, x, out)

    def _lgamma(self, x: Any, out: Any) -> Any:
        xp, c = self.xp, self.dt.type
        self._prepare(x)
        u, y, acc, tmp = self._u, self._y, self._acc, self._tmp
        # Stirling at y: (y - 1/2) log y - y + log(2 pi)/2 + sum_k a_k / y^(2k-1)
        xp.reciprocal(y, out=tmp)
        xp.multiply(tmp, tmp, out=acc)
        self._series(_LGAMMA_SERIES, acc, out)
        xp.multiply(out, y, out=out)  # a_k / y^(2k) times y
        xp.log(y, out=acc)
        xp.subtract(y, c(0.5), out=tmp)
        xp.multiply(acc, tmp, out=acc)
        xp.add(out, acc, out=out)
        xp.subtract(out, y, out=out)
        xp.add(out, c(_HALF_LOG_TWO_PI), out=out)
        # where shifted: minus log(u (u+1) ... (u+SHIFT-1)), a product below (2 SHIFT)! there
        xp.minimum(u, c(SHIFT), out=acc)
        for k in range(1, SHIFT):
            xp.minimum(u, c(SHIFT), out=tmp)
            xp.add(tmp, c(k), out=tmp)
            xp.multiply(acc, tmp, out=acc)
        xp.log(acc, out=acc)
        xp.multiply(acc, self._shifted, out=acc)
        xp.subtract(out, acc, out=out)
        # x <= 0: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)
        xp.multiply(self._r, c(math.pi), out=tmp)
        xp.sin(tmp, out=tmp)
        xp.abs(tmp, out=tmp)
        xp.divide(c(math.pi), tmp, out=tmp)
        xp.log(tmp, out=tmp)
        xp.subtract(tmp, out, out=tmp)
        xp.copyto(out, tmp, where=self._reflect)
        xp.equal(x, c(math.inf), out=self._reflect)  # Stirling would give inf - inf
        xp.copyto(out, x, where=self._reflect)
        return out

    def _digamma(self, x: Any, out: Any) -> Any:
        xp, c = self.xp, self.dt.type
        self._prepare(x)
        u, y, acc, tmp = self._u, self._y, self._acc, self._tmp
        # asymptotic at y: log y - 1/(2y) + sum_k b_k / y^(2k)
        xp.reciprocal(y, out=tmp)
        xp.multiply(tmp, tmp, out=acc)
        self._series(_DIGAMMA_SERIES, acc, out)
        xp.multiply(tmp, c(0.5), out=tmp)
        xp.subtract(out, tmp, out=out)
        xp.log(y, out=tmp)
        xp.add(out, tmp, out=out)
        # where shifted: minus sum_k 1 / (u + k)
        acc.fill(0)
        for k in range(SHIFT):
            xp.add(u, c(k), out=tmp)
            xp.reciprocal(tmp, out=tmp)
            xp.add(acc, tmp, out=acc)
        xp.multiply(acc, self._shifted, out=acc)
        xp.subtract(out, acc, out=out)
        # x <= 0: psi(x) = psi(1 - x) - pi / tan(pi x)
        xp.multiply(self._r, c(math.pi), out=tmp)
        xp.tan(tmp, out=tmp)
        xp.divide(c(math.pi), tmp, out=tmp)
        xp.subtract(out, tmp, out=tmp)
        xp.copyto(out, tmp, where=self._reflect)
        return out
