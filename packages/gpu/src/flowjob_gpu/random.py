"""The gpu backend's random streams: numpy's generator on the host, its draws copied to the device.

A seeded random op gives the same values on every backend (a seed means one stream, as the conformance
suite checks against numpy's ``default_rng``); CuPy's own ``Generator`` draws other values, and its
``out=`` fills do not behave as numpy's. Drawing on the host costs a host-to-device copy of the draw
each step: the random ops of the benchmark models are dropout masks, small beside their matrix products.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


class HostSeededGenerator:
    """The two draws op kernels make (``ctx.rng(seed)``), each filling a device array ``out`` in place."""

    def __init__(self, seed: int | None, from_host: Callable[[Any], Any]) -> None:
        self._host = np.random.default_rng(seed)
        self._from_host = from_host

    def random(self, *, out: Any, dtype: Any = np.float64) -> Any:
        """Uniform draws in [0, 1) of ``dtype`` (float32 or float64) into ``out``."""
        out[...] = self._from_host(self._host.random(out.shape, dtype=dtype))
        return out

    def standard_normal(self, *, out: Any, dtype: Any = np.float64) -> Any:
        """Standard normal draws of ``dtype`` (float32 or float64) into ``out``."""
        out[...] = self._from_host(self._host.standard_normal(out.shape, dtype=dtype))
        return out
