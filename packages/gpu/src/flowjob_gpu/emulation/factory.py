"""The emulated CuPy and cupyx modules, built on first use and the same object after (as an imported CuPy is).

Nothing is built or put into ``sys.modules`` at import: ``emulated_cupy()`` is what ``import cupy`` gives with
a device, ``emulated_cupyx()`` what ``import cupyx`` gives.
"""
from __future__ import annotations

import functools

from flowjob_gpu.emulation import cupyx_module, toplevel
from flowjob_gpu.emulation.modules import EmulatedModule


@functools.cache
def emulated_cupy() -> EmulatedModule:
    """The emulated ``cupy``: CuPy's names, numpy behind them (built on the first call)."""
    return toplevel.build()


@functools.cache
def emulated_cupyx() -> EmulatedModule:
    """The emulated ``cupyx`` (built on the first call)."""
    return cupyx_module.build()
