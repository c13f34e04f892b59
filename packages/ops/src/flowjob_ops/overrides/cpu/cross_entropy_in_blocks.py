"""``sparse_softmax_cross_entropy`` in runs of rows over the host threads: the cpu backend's override of the
record's kernel (``flowjob_ops.records.cross_entropy``), registered by ``flowjob_ops.overrides.cpu``.

The record computes every row at once; here a run of rows of about ``ROW_BLOCK_ITEMS`` logits stays in cache
through the max, exp, sum and divide passes, and the runs are shared over ``Backend.parallel``. Each row's max
and sum are its own, so the runs give the whole array's bits. Small tables run the record's kernel.
"""
from __future__ import annotations

import math
from typing import Any

from flowjob_core import KernelContext
from flowjob_core.backends.host_blocks import RowBlocks
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.records.cross_entropy import SPARSE_SOFTMAX_CROSS_ENTROPY, sparse_kernel_over_rows

ROW_BLOCK_ITEMS = 1 << 18
"""Logits per run of rows (1 MiB of float32): the run stays in cache through its passes, and runs are shared
over the host threads (one vocabulary-sized row is 30,522 values)."""


def sparse_softmax_cross_entropy_kernel(ctx: KernelContext) -> Any:
    logits = ctx.inputs[1]
    blocks = RowBlocks(ctx, (math.prod(logits.shape[:-1]), logits.shape[-1]), block=ROW_BLOCK_ITEMS)
    if blocks.whole:
        return SPARSE_SOFTMAX_CROSS_ENTROPY.kernel(ctx)
    return sparse_kernel_over_rows(ctx, blocks.each)


KERNEL_BUILDERS: dict[str, KernelBuilder] = {SPARSE_SOFTMAX_CROSS_ENTROPY.name: sparse_softmax_cross_entropy_kernel}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
