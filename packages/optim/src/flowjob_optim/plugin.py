"""The optim package's plugin: the ops (the dense updates, learning rate, clipping and step counter of
``update_ops``, gradient accumulation's, the indexed-slices updates of ``sparse_updates``, dynamic loss scaling's),
the passes (``optimizer``, ``loss-scale``, ``optim-fusion``) and the cpu backend's kernel overrides (``cpu``: SGD
folded into its gradient's GEMM, and the elementwise updates of large variables in blocks over the host threads)."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_optim import accumulation, cpu, fusion, loss_scale, optimizer_pass, sparse_updates, update_ops


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (*update_ops.OPS, *accumulation.OPS, *sparse_updates.OPS, *loss_scale.OPS):
        registry.add(op)


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add("optimizer", optimizer_pass.run, phase="update")
    registry.add("loss-scale", loss_scale.run, phase="differentiate", before="autodiff")
    registry.add("optim-fusion", fusion.run, phase="fuse")


@hookimpl
def flowjob_add_kernels(registry: Any) -> None:
    # the BLAS-fused SGD and the blocked updates on the cpu backend; the records' kernels stay the reference elsewhere
    for op, builder in cpu.KERNEL_BUILDERS.items():
        registry.add(op, cpu.CPU_TAG, builder)
