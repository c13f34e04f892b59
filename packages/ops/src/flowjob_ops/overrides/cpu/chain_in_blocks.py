"""``elementwise_chain`` in runs of leading rows over the host threads: the cpu backend's override of the
record's kernel (``flowjob_ops.records.fused``), registered by ``flowjob_ops.overrides.cpu``.

The record runs every step over the whole output; here each run of rows goes through all the steps while
in cache, and the runs are shared over ``Backend.parallel``. Every step is elementwise, so the runs give the
whole output's bits; an operand that broadcasts along the leading axis is passed whole (``RowBlocks.part``).
Small outputs run the record's kernel.
"""
from __future__ import annotations

import functools
from typing import Any

from flowjob_core import KernelContext
from flowjob_core.backends.host_blocks import RowBlocks
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.records.fused import ELEMENTWISE_CHAIN, chain_function


def elementwise_chain_kernel(ctx: KernelContext) -> Any:
    run, out = chain_function(ctx), ctx.out(0)
    blocks = RowBlocks(ctx, ctx.outputs[0].shape)
    if blocks.whole:
        return functools.partial(run, out)

    def run_in_blocks(*inputs: Any) -> Any:
        blocks.each(lambda rows: run(out[rows], *(blocks.part(x, rows) for x in inputs)))
        return out

    return run_in_blocks


KERNEL_BUILDERS: dict[str, KernelBuilder] = {ELEMENTWISE_CHAIN.name: elementwise_chain_kernel}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
