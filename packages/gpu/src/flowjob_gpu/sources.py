"""Finding the CUDA sources: ``FLOWJOB_KERNEL_DIR`` if set, else the package's own ``kernels/``.

The ``.cu`` files are package data of ``flowjob_gpu`` (``flowjob_gpu/kernels/cuda``), so a
wheel, an sdist and an editable install all find them the same way, through
``importlib.resources``; nothing outside the package is searched.
"""
from __future__ import annotations

import importlib.resources
import pathlib
from importlib.resources.abc import Traversable

from flowjob_core import switches


def kernel_dir() -> Traversable:
    """The folder holding ``cuda/<family>.cu``: ``FLOWJOB_KERNEL_DIR`` or the packaged ``kernels/``."""
    override = switches.current().kernel_dir
    if override:
        return pathlib.Path(override)
    return importlib.resources.files("flowjob_gpu") / "kernels"


def kernel_families() -> list[str]:
    """The names of the CUDA source families in ``kernel_dir()`` (``elementwise`` for ``elementwise.cu``)."""
    cuda = kernel_dir() / "cuda"
    if not cuda.is_dir():
        return []
    return sorted(entry.name[: -len(".cu")] for entry in cuda.iterdir() if entry.name.endswith(".cu"))


def kernel_source(family: str) -> str:
    """The CUDA C++ text of ``cuda/<family>.cu``; a missing file names the family and the folder searched."""
    root = kernel_dir()
    source = root / "cuda" / f"{family}.cu"
    if not source.is_file():
        where = "FLOWJOB_KERNEL_DIR" if switches.current().kernel_dir else "flowjob_gpu's packaged kernels"
        raise FileNotFoundError(
            f"flowjob-gpu: no CUDA source for kernel family {family!r}: {source} does not exist ({where})")
    return source.read_text(encoding="utf-8")
