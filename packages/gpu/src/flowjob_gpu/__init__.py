"""flowjob-gpu: the CuPy backend and CUDA kernel overrides."""
from flowjob_gpu.backend import available_cupy, make_backend
from flowjob_gpu.sources import kernel_dir, kernel_families, kernel_source

__version__ = "0.1.0"

__all__ = ["available_cupy", "kernel_dir", "kernel_families", "kernel_source", "make_backend"]
