"""The emulated CUDA runtime's error (``cupy.cuda.runtime.CUDARuntimeError``), apart so that the stream module and
the capture module below it both raise it."""
from __future__ import annotations


class CUDARuntimeError(RuntimeError):
    """A CUDA runtime error, as ``cupy.cuda.runtime.CUDARuntimeError``."""
