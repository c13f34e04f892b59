"""Kernel overrides for the ``cpu`` backend tag (numpy): tuned variants of reference kernels.

The op records (``flowjob_ops.records``) keep the plain ``xp`` kernels every backend can run; the
variants here pay only on numpy and give the same results (bit for bit for pooling, to float
rounding for Winograd and the blocked batch normalization). The ops plugin registers
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
