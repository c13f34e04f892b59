"""The CUDA sources the gpu backend compiles: ``FLOWJOB_KERNEL_DIR``'s folder if set, else flowjob-kernels'.

The sources and their loader are the flowjob-kernels distribution (``kernels/`` at the top of the
repository); this module only applies the switch, so every source goes through one loader.
"""
from __future__ import annotations

import functools
import pathlib
from importlib.resources.abc import Traversable
from typing import Any

import flowjob_kernels
from flowjob_core import switches


def kernel_dir() -> Traversable:
    """The folder holding ``cuda/<family>.cu``: ``FLOWJOB_KERNEL_DIR`` or flowjob-kernels' packaged one."""
    override = switches.current().kernel_dir
    if override:
        return pathlib.Path(override)
    return flowjob_kernels.source_dir()


def kernel_families() -> list[str]:
    """The names of the CUDA source families in ``kernel_dir()`` (``elementwise`` for ``elementwise.cu``)."""
    return flowjob_kernels.families(kernel_dir())


def kernel_source(family: str) -> str:
    """The CUDA C++ text of ``cuda/<family>.cu``; a missing file names the family and the folder searched."""
    try:
        return flowjob_kernels.source(family, kernel_dir())
    except FileNotFoundError as exc:
        where = "FLOWJOB_KERNEL_DIR" if switches.current().kernel_dir else "flowjob-kernels' packaged kernels"
        raise FileNotFoundError(f"flowjob-gpu: {exc} ({where})") from None


@functools.lru_cache(maxsize=None)
def compiled_module(cp: Any, family: str, device: int) -> Any:
    """``cuda/<family>.cu`` as a ``cupy.RawModule``, made once per device on first use (CuPy compiles it with NVRTC
    then and keeps the binary on disk)."""
    return cp.RawModule(code=kernel_source(family))
