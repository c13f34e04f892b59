"""The gpu package's plugin: the CuPy backend and its kernel overrides, only where a device exists;
with ``FLOWJOB_GPU_EMULATION=1``, the backend on the emulated CuPy instead, device or not."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl, switches

from flowjob_gpu.backend import available_cupy, make_backend
from flowjob_gpu import optimizer_kernels
from flowjob_gpu.emulation.backend import make_emulated_backend
from flowjob_gpu.overrides import ARRAY_KERNEL_BUILDERS, KERNEL_BUILDERS, LIBRARY_KERNEL_BUILDERS


@hookimpl
def flowjob_add_backends(registry: Any) -> None:
    if switches.current().gpu_emulation:
        registry.add(make_emulated_backend())
        return
    cp = available_cupy()
    if cp is not None:
        registry.add(make_backend(cp))


@hookimpl
def flowjob_add_kernels(registry: Any) -> None:
    # the device random streams and the device-checked gather are array code: the emulated CuPy runs them as CuPy
    if switches.current().gpu_emulation or available_cupy() is not None:
        for op, builder in ARRAY_KERNEL_BUILDERS.items():
            registry.add(op, "gpu", builder, optional=True)  # flowjob-ops' ops, where its plugin is loaded
    # the overrides launch hand-written CUDA (cupy.RawModule) or call cuDNN, which the emulated CuPy cannot: under
    # emulation the gpu backend runs every op's xp kernel, as it does for ops without an override
    if switches.current().gpu_emulation or available_cupy() is None:
        return
    for op, builder in KERNEL_BUILDERS.items():
        # flowjob-optim's updates are overridden where its plugin is loaded; the rest are flowjob-ops' ops
        registry.add(op, "gpu", builder, optional=op in optimizer_kernels.KERNEL_BUILDERS)
    for op, builder in LIBRARY_KERNEL_BUILDERS.items():
        registry.add(op, "gpu", builder)  # each node chooses cuDNN or the record's kernel when the plan is built
