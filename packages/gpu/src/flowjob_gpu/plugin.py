"""The gpu package's plugin: the CuPy backend and its kernel overrides, only where a device exists."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_gpu.backend import available_cupy, make_backend
from flowjob_gpu.overrides import KERNEL_BUILDERS


@hookimpl
def flowjob_add_backends(registry: Any) -> None:
    cp = available_cupy()
    if cp is not None:
        registry.add(make_backend(cp))


@hookimpl
def flowjob_add_kernels(registry: Any) -> None:
    if available_cupy() is None:
        return
    for op, builder in KERNEL_BUILDERS.items():
        registry.add(op, "gpu", builder)
