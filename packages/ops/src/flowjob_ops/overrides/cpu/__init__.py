"""Kernel overrides for the ``cpu`` backend tag (numpy): tuned variants of reference kernels.

The op records (``flowjob_ops.records``) keep the reference kernels every backend runs, plain whole-array
math written against ``xp``; the host tuning lives here, and pays only on numpy: blocks sized for a core's
cache and work shared over the host threads (``flowjob_core.backends.host_blocks``), GEMMs cut over the host
threads (``host_gemm``). The variants give the records' results (bit for bit for pooling and the elementwise
blocks, to float rounding for Winograd, split GEMMs and the blocked batch normalization), which the
conformance suite checks: the 2-D convolutions (``conv``, with ``batch_parts``), the pooling
(``pool_cache_blocked`` over ``pool_plane_layout``), ``batch_norm``, ``relu_grad`` and ``gelu``
(``activations_in_blocks``), ``sparse_softmax_cross_entropy`` (``cross_entropy_in_blocks``),
``elementwise_chain`` (``chain_in_blocks``) and ``matmul`` / ``matmul_bias`` (``matmul_parts``). The ops
plugin registers ``KERNEL_BUILDERS`` for ``CPU_TAG`` through ``flowjob_add_kernels``; a backend with another
tag (a GPU, a plugin's device) runs the reference.
"""
from __future__ import annotations

from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.overrides.cpu import (activations_in_blocks, batch_norm, chain_in_blocks, conv,
                                       cross_entropy_in_blocks, matmul_parts, pool_cache_blocked)

CPU_TAG = "cpu"

KERNEL_BUILDERS: dict[str, KernelBuilder] = {
    **activations_in_blocks.KERNEL_BUILDERS, **batch_norm.KERNEL_BUILDERS, **chain_in_blocks.KERNEL_BUILDERS,
    **conv.KERNEL_BUILDERS, **cross_entropy_in_blocks.KERNEL_BUILDERS, **matmul_parts.KERNEL_BUILDERS,
    **pool_cache_blocked.KERNEL_BUILDERS}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
