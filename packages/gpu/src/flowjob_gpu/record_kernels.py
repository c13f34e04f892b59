"""What the hand-kernel builders share: the op record's own kernel where a CUDA source does not cover a node,
and C-contiguous copies of inputs for kernels that walk flat memory."""
from __future__ import annotations

from typing import Any

from flowjob_core import FlowjobError, KernelContext


def own_kernel(ctx: KernelContext, why: str) -> Any:
    """The op record's xp kernel, for a node the CUDA source does not cover (``why``: what it lacks, in words)."""
    if ctx.ops is None:
        raise FlowjobError(f"op {ctx.node_name!r} ({ctx.op}): no CUDA kernel for {why}, and the record's own kernel "
                           f"is found in the session's op registry (KernelContext.ops), which this context lacks")
    return ctx.ops[ctx.op].kernel(ctx)


class ContiguousInputs:
    """C-contiguous views of a node's inputs: an input that is already contiguous as itself, another copied into
    a buffer of this node made on the first such call (``ctx.workspace``) and reused by later ones, so no step
    after the first allocates."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx, self.cp = ctx, ctx.xp
        self.buffers: dict[int, Any] = {}

    def __call__(self, index: int, a: Any) -> Any:
        if a.flags.c_contiguous:
            return a
        buf = self.buffers.get(index)
        if buf is None:
            spec = self.ctx.inputs[index]
            buf = self.buffers[index] = self.ctx.workspace(spec.shape, spec.dtype)
        self.cp.copyto(buf, a)
        return buf



BLOCK = 256  # threads a block of a grid-stride launch (flowjob-kernels' launch rule)
MAX_BLOCKS = 4096  # the grid-stride loop covers the rest


def launch_grid(count: int, per_block: int = BLOCK, most: int = MAX_BLOCKS) -> tuple[int]:
    """The 1-D grid of a launch over ``count`` items, ``per_block`` a block (elements of a grid-stride loop, or the
    channels a block reduces): enough blocks to cover them, at least one, at most ``most`` (the kernel's loop
    strides over the rest)."""
    return (max(1, min(-(-count // per_block), most)),)
