"""flowjob's emulated CuPy, importable as ``flowjob_gpu.emulation.cupy``: CuPy's names, numpy behind them.

This module replaces itself, on import, by the module ``toplevel.build()`` makes, so that it has
exactly CuPy's names and nothing of its own.
"""
import sys

from flowjob_gpu.emulation.toplevel import build

sys.modules[__name__] = build()
