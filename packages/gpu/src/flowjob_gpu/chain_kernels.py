"""The gpu backend's ``elementwise_chain`` kernel: the chain's generated source (``chain_source``) as one
``cupy.ElementwiseKernel``, built once per chain signature and launched into the planned output buffer.

The kernel object is cached by its source (which is the signature: steps, dtypes, where the number
operands go; not their values, which are arguments); CuPy compiles it on its first launch for each
device and number of dimensions, and keeps the binary on disk across processes. A chain the
templates do not cover keeps the record's own xp kernel; the reason is logged (``flowjob.gpu``,
debug) and ``python -m oneflow dump --cuda`` prints it.
"""
from __future__ import annotations

import functools
import logging
from typing import Any

from flowjob_core import FlowjobError, KernelContext

from flowjob_gpu.chain_source import CHAIN_OP, ChainKernel, ChainSource, chain_kernel

logger = logging.getLogger("flowjob.gpu")


@functools.lru_cache(maxsize=None)
def compiled(cp: Any, source: ChainSource) -> Any:
    """The ``ElementwiseKernel`` of ``source`` for the array module ``cp``: one object per signature."""
    return cp.ElementwiseKernel(source.in_params, source.out_params, source.operation, source.name)


def compiles_cuda(xp: Any) -> bool:
    """Whether the array module builds CUDA kernels (CuPy's ``ElementwiseKernel``); one that does not
    (numpy, a stand-in without a compiler) runs every chain on the xp kernel."""
    return getattr(xp, "ElementwiseKernel", None) is not None


def node_chain_kernel(ctx: KernelContext) -> ChainKernel:
    """The generated kernel (or the reason there is none) for the chain node ``ctx`` builds."""
    if ctx.ops is None:
        raise FlowjobError(f"elementwise_chain {ctx.node_name!r}: the gpu kernel reads its steps' records from "
                           f"the session's op registry (KernelContext.ops), which this context lacks")
    if not compiles_cuda(ctx.xp):
        return ChainKernel(None, reason=f"the array module {getattr(ctx.xp, '__name__', ctx.xp)!r} compiles no "
                                        f"CUDA (no ElementwiseKernel)")
    return chain_kernel(ctx.attrs["steps"], [spec.dtype for spec in ctx.inputs], ctx.outputs[0].dtype, ctx.ops)


def elementwise_chain_kernel(ctx: KernelContext) -> Any:
    """The gpu override of ``elementwise_chain``: one launch for the whole chain."""
    chain = node_chain_kernel(ctx)
    if chain.source is None:
        logger.debug("elementwise_chain %r keeps the xp kernel: %s", ctx.node_name, chain.reason)
        return ctx.ops[CHAIN_OP].kernel(ctx)
    kernel, constants, out = compiled(ctx.xp, chain.source), chain.constants, ctx.out(0)

    def run(*inputs: Any) -> Any:
        kernel(*inputs, *constants, out)
        return out

    return run
