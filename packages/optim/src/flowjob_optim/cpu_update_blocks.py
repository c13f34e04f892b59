"""The elementwise updates of large variables block by block over the host threads: the cpu backend's
overrides of the update ops' kernels (``flowjob_optim.update_ops.UpdateKernel``), registered with the BLAS SGD
by ``flowjob_optim.cpu``.

A rule whose step is elementwise (``StepRule.elementwise``: SGD, momentum, Adam, RMSProp) updates a large variable
in blocks shared over the host threads (``flowjob_core.backends.host_blocks.FlatBlocks``). Each block is the
rule's own step built for its size (scratch per thread): elementwise, so the same bits as the record's whole
update, and each block goes through all of the rule's passes while in cache (Adam's dozen passes over an
embedding table cost half as much so on one thread). The record's whole update runs where this does not apply:
one block (a small variable), a device backend, a clipped or regularized gradient, or a rule that reads the
whole variable (LARS's and LAMB's norms).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from flowjob_core import BlobSpec, FlowjobError, KernelContext, OpDef
from flowjob_core.backends.host_blocks import SHARED_BLOCK_ITEMS, FlatBlocks
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_optim.update_ops import UPDATE_OPS, StepRule, UpdateKernel


def in_blocks(ctx: KernelContext, rule: StepRule, end: int, scale: Any) -> Any | None:
    """The plain update (``update_ops.InParts``) block by block over the host threads, or None where it does not
    apply. ``scale``: a gradient scale folded into the rate."""
    spec = ctx.inputs[0]
    if not rule.elementwise:
        return None
    blocks = FlatBlocks(ctx, spec.size, block=SHARED_BLOCK_ITEMS)
    if len(blocks.ranges) < 2:
        return None

    def block_context(size: int) -> KernelContext:
        # built on first use by the thread running the block: its scratch is its own (``_scratch=None``), never
        # the plan's pool, whose lending is for kernels built before the step and running one node at a time
        return dataclasses.replace(ctx, inputs=tuple(BlobSpec((size,), s.dtype) if s.shape == spec.shape else s
                                                     for s in ctx.inputs), _scratch=None)

    def run_in_blocks(*args: Any) -> None:
        w, slots, g = args[0], args[1:end], args[end]
        lr = args[end + 1][0] if scale is None else args[end + 1][0] * scale
        if not (w.flags.c_contiguous and all(x.flags.c_contiguous for x in slots)):
            raise FlowjobError(f"op {ctx.node_name!r} ({ctx.op}): the variable and its slots must be contiguous "
                               f"to update in blocks")
        flat_w, flat_slots, flat_g = w.reshape(-1), [x.reshape(-1) for x in slots], g.reshape(-1)

        def block(start: int, stop: int) -> None:
            size = stop - start
            step = blocks.per_thread(size, lambda: rule(block_context(size)))
            step(flat_w[start:stop], [x[start:stop] for x in flat_slots], flat_g[start:stop], lr)

        blocks.each(block)

    return run_in_blocks


class BlockedUpdate:
    """The kernel builder of one update op on the cpu backend: its record's ``UpdateKernel`` with the plain
    update in blocks over the host threads (``in_blocks``)."""

    def __init__(self, record: OpDef) -> None:
        if not isinstance(record.kernel, UpdateKernel):
            raise TypeError(f"op {record.name!r}: its kernel is not an update_ops.UpdateKernel")
        self.record = record
        self._reference = record.kernel

    def __call__(self, ctx: KernelContext) -> Any:
        return self._reference.build(ctx, in_parts=in_blocks)


def _has_elementwise_rule(record: OpDef) -> bool:
    return isinstance(record.kernel, UpdateKernel) and record.kernel.rule.elementwise


KERNEL_BUILDERS: dict[str, KernelBuilder] = {name: BlockedUpdate(record) for name, record in UPDATE_OPS.items()
                                              if _has_elementwise_rule(record)}
"""op name -> kernel builder, overriding the record's kernel on the cpu backend (the updates whose rule is
elementwise)."""
