"""Kernel overrides for the gpu backend: one fused launch where the xp kernel needs several.

Each hand-kernel family is a module named after its CUDA source (``<family>_kernels.py`` for flowjob-kernels'
``cuda/<family>.cu``) that gives its entries of the two tables below."""
from __future__ import annotations

from flowjob_gpu import (
    batch_norm_kernels, cross_entropy_kernels, cudnn_convolution, device_gather, device_random, elementwise_kernels,
    optimizer_kernels, pooling_kernels)
from flowjob_gpu.chain_kernels import elementwise_chain_kernel

FAMILIES = (elementwise_kernels, cross_entropy_kernels, batch_norm_kernels, pooling_kernels, optimizer_kernels)

# (op, CUDA family, symbol per dtype): a CPU-only test checks each symbol is an entry point of flowjob-kernels'
# cuda/<family>.cu, whose own tests check, where nvcc is present, the entry points of the compiled PTX
OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {
    op: entry for family in FAMILIES for op, entry in family.OVERRIDES.items()}

KERNEL_BUILDERS = {
    "elementwise_chain": elementwise_chain_kernel,
    **{op: builder for family in FAMILIES for op, builder in family.KERNEL_BUILDERS.items()},
}

ARRAY_KERNEL_BUILDERS = {**device_random.KERNEL_BUILDERS, **device_gather.KERNEL_BUILDERS}
"""Overrides written as array code (no CUDA source): they keep on the device what the records keep on the host (a
random stream's counter, an index check), and run on the emulated CuPy too."""

LIBRARY_KERNEL_BUILDERS = dict(cudnn_convolution.KERNEL_BUILDERS)
"""Overrides that call a CUDA library beyond CuPy's: the convolutions on cuDNN through nvidia-cudnn-frontend (the
extra ``flowjob-gpu[cudnn]``), each node falling back to the record's im2col + cuBLAS kernel where cuDNN does not
run it. A real device's only: the emulated CuPy has no cuDNN."""
