"""The gpu backend on the emulated CuPy: the real backend's description, with the emulated module."""
from __future__ import annotations

import dataclasses

import numpy as np

from flowjob_core import Backend
from flowjob_gpu.emulation.factory import emulated_cupy
from flowjob_gpu.backend import make_backend

NAME = "cupy-emulated"


def make_emulated_backend() -> Backend:
    """The ``gpu`` backend (``name`` ``cupy-emulated``) on the emulated CuPy (``factory.emulated_cupy()``)."""
    cupy = emulated_cupy()
    # no NVTX without a device: flow.profiler's ranges are timed and logged only
    return dataclasses.replace(make_backend(cupy), name=NAME, profiler_range=None,
                               description=f"emulated CuPy (CuPy {cupy.__version__.split('+')[0]}'s names, "
                                           f"numpy {np.__version__} behind them)")
