"""Kernel overrides for the ``cpu`` backend tag (numpy): tuned variants of reference kernels.

The op records (``flowjob_ops.records``) keep the reference kernels every backend runs, written against ``xp``
(some of them still split their work over the host threads themselves where the backend offers them: the
records of ``activations``, ``conv``, ``cross_entropy``, ``fused`` and ``matmul`` use
``flowjob_core.backends.host_blocks`` or ``host_gemm``); the variants here pay only on numpy and give the same
results (bit for bit for pooling, to float rounding for Winograd and the blocked batch normalization): the 2-D
convolutions (``conv``, with ``batch_parts``), the pooling (``pool_cache_blocked`` over ``pool_plane_layout``)
and ``batch_norm``. The ops plugin registers
``KERNEL_BUILDERS`` for ``CPU_TAG`` through ``flowjob_add_kernels``; a backend with another tag (a GPU,
a plugin's device) runs the reference.
"""
from __future__ import annotations

from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.overrides.cpu import batch_norm, conv, pool_cache_blocked

CPU_TAG = "cpu"

KERNEL_BUILDERS: dict[str, KernelBuilder] = {**batch_norm.KERNEL_BUILDERS, **conv.KERNEL_BUILDERS,
                                              **pool_cache_blocked.KERNEL_BUILDERS}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
