"""The CuPy backend; CuPy is imported only when a session gathers its backends."""
from __future__ import annotations

from typing import Any

from flowjob_core import Backend

from flowjob_gpu.random import HostSeededGenerator
from flowjob_gpu.step_graphs import step_recorder


def available_cupy() -> Any | None:
    """The cupy module if it imports and sees a CUDA device, else None."""
    try:
        import cupy
    except Exception:  # not installed, or a broken CUDA install: the CPU backend serves
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


def make_backend(cp: Any) -> Backend:
    def synchronize() -> None:
        cp.cuda.get_current_stream().synchronize()

    return Backend(
        tag="gpu",
        name="cupy",
        xp=cp,
        device_count=lambda: cp.cuda.runtime.getDeviceCount(),
        to_host=cp.asnumpy,
        from_host=cp.asarray,
        make_rng=lambda seed: HostSeededGenerator(seed, cp.asarray),
        synchronize=synchronize,
        description=f"cupy {cp.__version__}",
        # NVTX ranges, which Nsight Systems shows (flow.profiler); looked up when used
        profiler_range=(lambda name: cp.cuda.nvtx.RangePush(name), lambda: cp.cuda.nvtx.RangePop()),
        step_recorder=step_recorder(cp),  # whole-step CUDA graphs (FLOWJOB_CUDA_GRAPHS)
        arena_in_one_allocation=True,
    )
