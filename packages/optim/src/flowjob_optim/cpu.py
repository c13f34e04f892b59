"""Kernel overrides for the ``cpu`` backend tag (numpy): plain SGD as one BLAS call, and the elementwise updates
of large variables in blocks over the host threads (``flowjob_optim.cpu_update_blocks``).

``optim_sgd_matmul_update`` (made by the optim-fusion pass) computes
``w -= lr * grad_scale * op(a) @ op(b)``. Its record's kernel, the reference every backend runs,
is ``matmul`` into a gradient buffer then the update; on numpy this override is a single
``?gemm`` with ``beta = 1`` writing ``w`` (numpy's own OpenBLAS, reached through ``_blas``), with
no gradient buffer and no extra memory passes. ``FLOWJOB_BLAS_FUSION=0``
(``flowjob_core.switches``, read when a job is planned) turns it off.

The pass fuses only where the fused node runs as one call: it asks the backend's kernel builder
for the op, and this override answers through ``fuses(dtype)`` (see ``update_ops.fused_sgd_available``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowjob_core import KernelContext, switches
from flowjob_core.backends.host_gemm import GEMM_PARTS, gemm_split, matmul_parts, operand_shape
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_optim import _blas, cpu_update_blocks
from flowjob_optim.update_ops import SGD_MATMUL_UPDATE

CPU_TAG = "cpu"


class BlasSgdMatmulUpdate:
    """The kernel builder of ``optim_sgd_matmul_update`` on numpy: one ``?gemm`` per step."""

    @staticmethod
    def fuses(dtype: Any) -> bool:
        """Whether a fused node of this dtype runs as one BLAS call (switch on, numpy's BLAS reachable)."""
        return switches.current().blas_fusion and _blas.gemm(np.dtype(dtype)) is not None

    def __call__(self, ctx: KernelContext) -> Any:
        spec = ctx.inputs[0]
        gemm = _blas.gemm(spec.dtype) if switches.current().blas_fusion else None
        if gemm is None:  # a node fused where BLAS was reachable, planned after it was switched off
            return SGD_MATMUL_UPDATE.kernel(ctx)
        ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
        s = spec.dtype.type(ctx.attrs.get("grad_scale", 1.0))

        split = gemm_split(ctx.backend)
        a_spec, b_spec = ctx.inputs[1:3]
        how = matmul_parts(operand_shape(a_spec.shape, ta), operand_shape(b_spec.shape, tb)) if split else None
        rows = spec.shape[0]
        if how is None or rows < 4 * GEMM_PARTS:
            def run(w: Any, a: Any, b: Any, lr: Any) -> None:
                # C-ordered w += alpha op(a) op(b): ?gemm with beta = 1 writes w, reading transposed operands in place
                gemm(-float(lr[0] * s), a, b, ta, tb, 1.0, w)

            return run
        # a plan holding BLAS to one thread: one block of w's rows (contiguous, as ?gemm writes them) per thread

        def run_in_blocks(w: Any, a: Any, b: Any, lr: Any) -> None:
            alpha = -float(lr[0] * s)

            def part(lo: int, hi: int) -> None:
                gemm(alpha, a[:, lo:hi] if ta else a[lo:hi], b, ta, tb, 1.0, w[lo:hi])

            split(part, rows)

        return run_in_blocks


KERNEL_BUILDERS: dict[str, KernelBuilder] = {SGD_MATMUL_UPDATE.name: BlasSgdMatmulUpdate(),
                                              **cpu_update_blocks.KERNEL_BUILDERS}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
