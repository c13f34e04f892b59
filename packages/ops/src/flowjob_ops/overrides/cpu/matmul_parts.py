"""``matmul`` and ``matmul_bias`` with a large product in parts over the host threads: the cpu backend's
overrides of the records' one-call GEMMs (``flowjob_ops.records.matmul``, ``flowjob_ops.records.fused``),
registered by ``flowjob_ops.overrides.cpu``.

BLAS keeps one thread per caller (``flowjob_core.backends.blas_threads``), so a large product uses the cores by
one block of the output's rows (or columns, or stacked entries) per host thread (``host_gemm.SplitMatmul``);
every part is one BLAS call on the same operands, so the results are the record's to BLAS's own rounding.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core import KernelContext
from flowjob_core.backends.host_gemm import SplitMatmul, gemm_split, operand_shape
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.records.fused import MATMUL_BIAS, matmul_bias_kernel_with
from flowjob_ops.records.matmul import MATMUL, matmul_kernel_with


def split_product(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """``product(a, b, out)`` for the node's (possibly transposed) operands, in parts over the host threads."""
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    a_spec, b_spec = ctx.inputs[:2]
    return SplitMatmul(ctx.xp, operand_shape(a_spec.shape, ta), operand_shape(b_spec.shape, tb),
                       gemm_split(ctx.backend))


def matmul_kernel(ctx: KernelContext) -> Any:
    return matmul_kernel_with(ctx, split_product(ctx))


def matmul_bias_kernel(ctx: KernelContext) -> Any:
    return matmul_bias_kernel_with(ctx, split_product(ctx))


KERNEL_BUILDERS: dict[str, KernelBuilder] = {MATMUL.name: matmul_kernel, MATMUL_BIAS.name: matmul_bias_kernel}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
