"""Finding a kernel source by family: ``cuda/<family>.cu`` under a kernel folder, this package's by default.

The ``.cu`` files are package data, so a wheel, an sdist and an editable install all find them the
same way, through ``importlib.resources``. A caller may name another folder of the same layout
(flowjob-gpu passes ``FLOWJOB_KERNEL_DIR``'s) to try a kernel without reinstalling.
"""
from __future__ import annotations

import importlib.resources
import re
from importlib.resources.abc import Traversable

# an entry point: C linkage, so the symbol is the plain name a launcher looks up (no C++ mangling)
ENTRY_POINT = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def source_dir() -> Traversable:
    """The packaged kernel folder: it holds ``cuda/<family>.cu``."""
    return importlib.resources.files("flowjob_kernels")


def families(root: Traversable | None = None) -> list[str]:
    """The CUDA source families in ``root`` (default: the packaged folder), ``elementwise`` for
    ``cuda/elementwise.cu``; none where ``root`` has no ``cuda/`` folder."""
    cuda = (source_dir() if root is None else root) / "cuda"
    if not cuda.is_dir():
        return []
    return sorted(entry.name[: -len(".cu")] for entry in cuda.iterdir() if entry.name.endswith(".cu"))


def source(family: str, root: Traversable | None = None) -> str:
    """The CUDA C++ text of ``cuda/<family>.cu`` in ``root`` (default: the packaged folder); a missing
    file is a ``FileNotFoundError`` naming the family and the path looked at."""
    path = (source_dir() if root is None else root) / "cuda" / f"{family}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source for kernel family {family!r}: {path} does not exist")
    return path.read_text(encoding="utf-8")


def entry_points(text: str) -> list[str]:
    """The ``extern "C" __global__`` functions a CUDA source defines, in order: the symbols a launcher
    may look up in the module compiled from it."""
    return ENTRY_POINT.findall(text)
