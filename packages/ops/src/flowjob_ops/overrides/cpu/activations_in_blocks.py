"""``relu_grad``, ``gelu`` and ``gelu_grad`` block by block over the host threads: the cpu backend's overrides
of the records' whole-array kernels (``flowjob_ops.records.activations``), registered by ``flowjob_ops.overrides.cpu``.

Each block goes through all of the kernel's passes while it is in cache (gelu's normal CDF is some thirty
ufunc passes), and the blocks are shared over ``Backend.parallel`` (``flowjob_core.backends.host_blocks``).
The math is elementwise, so a block gives the bits of the whole array. Small arrays run the record's kernel.
"""
from __future__ import annotations

import math
from typing import Any

from flowjob_core import KernelContext
from flowjob_core.backends.host_blocks import FlatBlocks, RowBlocks
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_ops.kernels.normal_cdf import NormalCdf
from flowjob_ops.records.activations import GELU, GELU_GRAD, RELU_GRAD


def relu_grad_kernel(ctx: KernelContext) -> Any:
    """dy where y > 0, in runs of leading rows (the operands may be strided views)."""
    blocks = RowBlocks(ctx, ctx.outputs[0].shape)
    if blocks.whole:
        return RELU_GRAD.kernel(ctx)
    xp, out = ctx.xp, ctx.out(0)
    mask = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run_in_blocks(y: Any, dy: Any) -> Any:
        def block(rows: slice) -> None:
            xp.greater(y[rows], 0, out=mask[rows])
            xp.multiply(dy[rows], mask[rows], out=out[rows])

        blocks.each(block)
        return out

    return run_in_blocks


def gelu_kernel(ctx: KernelContext) -> Any:
    """x * Phi(x) over flat blocks, each thread with its own CDF scratch."""
    spec = ctx.outputs[0]
    blocks = FlatBlocks(ctx, math.prod(spec.shape))
    if len(blocks.ranges) < 2:
        return GELU.kernel(ctx)
    xp, out = ctx.xp, ctx.out(0)
    flat_out = out.reshape(-1)

    def run_in_blocks(x: Any) -> Any:
        flat_x = x.reshape(-1)

        def block(start: int, stop: int) -> None:
            cdf = blocks.per_thread(stop - start, lambda: NormalCdf(xp, (stop - start,), spec.dtype))
            x_part, out_part = flat_x[start:stop], flat_out[start:stop]
            cdf.cdf(x_part, out_part)
            xp.multiply(out_part, x_part, out=out_part)

        blocks.each(block)
        return out

    return run_in_blocks


def gelu_grad_kernel(ctx: KernelContext) -> Any:
    """dy * (Phi(x) + x phi(x)) over flat blocks, each thread with its own CDF and pdf scratch."""
    spec = ctx.outputs[0]
    blocks = FlatBlocks(ctx, math.prod(spec.shape))
    if len(blocks.ranges) < 2:
        return GELU_GRAD.kernel(ctx)
    xp, out = ctx.xp, ctx.out(0)
    flat_out = out.reshape(-1)

    def run_in_blocks(x: Any, dy: Any) -> Any:
        flat_x, flat_dy = x.reshape(-1), dy.reshape(-1)

        def block(start: int, stop: int) -> None:
            size = stop - start
            cdf = blocks.per_thread(size, lambda: NormalCdf(xp, (size,), spec.dtype))
            pdf = blocks.per_thread(("pdf", size), lambda: xp.empty(size, dtype=spec.dtype))
            x_part, out_part = flat_x[start:stop], flat_out[start:stop]
            cdf.pdf(x_part, pdf)
            xp.multiply(pdf, x_part, out=pdf)
            cdf.cdf(x_part, out_part)
            xp.add(out_part, pdf, out=out_part)
            xp.multiply(out_part, flat_dy[start:stop], out=out_part)

        blocks.each(block)
        return out

    return run_in_blocks


KERNEL_BUILDERS: dict[str, KernelBuilder] = {RELU_GRAD.name: relu_grad_kernel, GELU.name: gelu_kernel,
                                              GELU_GRAD.name: gelu_grad_kernel}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend."""
