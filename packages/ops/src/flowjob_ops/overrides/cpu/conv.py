"""The cpu backend's overrides of the 2-D convolution kernels (checked by the conformance suite against
the rank-generic reference of ``flowjob_ops.kernels.conv``): the 2-D im2col of ``kernels.conv2d_forward``
(GEMMs into strided outputs, the forward's matrix kept for the filter gradient; the fused ops'
kernels, ``records.conv.im2col_*``), 1x1 products and Winograd.

On numpy, 1x1 convolutions on NCHW without padding or groups are batched matrix products over x
as it lies (``flowjob_ops.kernels.pointwise``: no im2col, no layout copies, nothing kept from the
forward for the filter gradient). Winograd F(m x m, r x r) (``flowjob_ops.kernels.winograd``) is chosen per node, from
the static shapes when the plan is built, where it applies (stride 1, no dilation, one group,
square 3/4/5 kernel) and has enough channels for its 64 channel GEMMs to pay
(``winograd.worthwhile``); elsewhere the 2-D im2col + GEMM runs.
``FLOWJOB_CONV_ALGORITHM`` (``flowjob_core.switches``, read when a plan is built) overrides the
choice: ``im2col`` everywhere (the 1x1 path included), ``winograd`` wherever it applies, ``auto``
(the default).

Winograd is a CPU algorithm here (its transforms are many small GEMMs on strided views); other
backends keep the reference im2col, whose one large GEMM suits them. The im2col data gradient runs in
parts over the batch on the host threads where it is large enough (``batch_parts``).

The filter gradient reuses its forward's transformed input: the forward kernel of a train job
publishes itself in the plan's shared kernel dict under ``("conv2d-winograd", node name)``, and
the filter-gradient kernel named by its ``forward`` attribute takes the transform from it when it
was made from the very array it is given (else it transforms x itself).
"""
from __future__ import annotations

from typing import Any

from flowjob_core import KernelContext, switches
from flowjob_core.backends.host_gemm import gemm_split

from flowjob_core.backends.host_blocks import host_parallel
from flowjob_ops.overrides.cpu import batch_parts
from flowjob_ops.overrides.cpu.pool_cache_blocked import TiledMaxPool2d
from flowjob_ops.records import conv as conv_records
from flowjob_ops.kernels import pointwise, winograd
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry


def algorithm(geom: ConvGeometry) -> str:
    """"pointwise", "winograd" or "im2col" for this convolution on the cpu backend (see the module
    docstring)."""
    choice = switches.current().conv_algorithm
    if choice == "im2col":
        return "im2col"
    if pointwise.applicable(geom):
        return "pointwise"
    usable = winograd.applicable(geom) if choice == "winograd" else winograd.worthwhile(geom)
    return "winograd" if usable else "im2col"


def conv_kernel(ctx: KernelContext) -> Any:
    """conv2d and conv2d_bias (with its optional ReLU)."""
    x, w = ctx.inputs[:2]
    geom = conv_records.geometry(x.shape, w.shape, ctx.attrs)
    chosen = algorithm(geom)
    bias = ctx.op == "conv2d_bias"
    relu = bias and ctx.attrs.get("activation") == "relu"
    if chosen == "pointwise":
        return pointwise.PointwiseForward(ctx.xp, geom, x.dtype, bias=bias, relu=relu, out=ctx.out(0),
                                          scratch=ctx.scratch, products=gemm_split(ctx.backend))
    if chosen != "winograd":
        return _IM2COL[ctx.op](ctx)
    fast = winograd.WinogradForward(ctx.xp, geom, x.dtype, bias=bias, relu=relu, parallel=host_parallel(ctx))
    if ctx.training:  # the filter-gradient node reuses its transformed input (see grad_filter_kernel)
        ctx.shared[("conv2d-winograd", ctx.node_name)] = fast
    return fast


def grad_data_kernel(ctx: KernelContext) -> Any:
    dy, w = ctx.inputs
    geom = conv_records.geometry(ctx.attrs["x_shape"], w.shape, ctx.attrs)
    chosen = algorithm(geom)
    if chosen == "pointwise":
        return pointwise.PointwiseBackwardData(ctx.xp, geom, dy.dtype, out=ctx.out(0), scratch=ctx.scratch,
                                               products=gemm_split(ctx.backend))
    if chosen != "winograd":
        return batch_parts.data_gradient(ctx) or _IM2COL[ctx.op](ctx)
    return winograd.WinogradBackwardData(ctx.xp, geom, dy.dtype, parallel=host_parallel(ctx))


def grad_filter_kernel(ctx: KernelContext) -> Any:
    x, _ = ctx.inputs
    geom = conv_records.geometry(x.shape, ctx.attrs["w_shape"], ctx.attrs)
    chosen = algorithm(geom)
    if chosen == "pointwise":
        return pointwise.PointwiseBackwardFilter(ctx.xp, geom, x.dtype, out=ctx.out(0), scratch=ctx.scratch,
                                                 products=gemm_split(ctx.backend))
    if chosen != "winograd":
        return _IM2COL[ctx.op](ctx)
    forward = ctx.shared.get(("conv2d-winograd", ctx.attrs.get("forward")))
    if not isinstance(forward, winograd.WinogradForward) or forward.geom != geom or forward.dtype != x.dtype:
        forward = None
    fast = winograd.WinogradBackwardFilter(ctx.xp, geom, x.dtype, forward=forward, parallel=host_parallel(ctx))

    def run(x_value: Any, dy_value: Any) -> Any:
        # reused only if the forward kernel's transform was made from this very array
        return fast(x_value, dy_value, reuse=True)

    return run


def conv_bias_pool_kernel(ctx: KernelContext) -> Any:
    """conv2d_bias_pool: Winograd where it pays, and the blocked max pooling."""
    x, w = ctx.inputs[:2]
    geom = conv_records.geometry(x.shape, w.shape, conv_records.conv_attrs(ctx.attrs))
    chosen = "winograd" if algorithm(geom) == "winograd" else "im2col"  # the fused kernel has no 1x1 path
    return conv_records.conv_bias_pool(ctx, algorithm=chosen, max_pool=TiledMaxPool2d, parallel=host_parallel(ctx),
                                       products=gemm_split(ctx.backend))


def _host_tuning(ctx: KernelContext) -> dict[str, Any]:
    """The im2col kernels' host tuning: copies in parts over the batch, GEMMs cut over the host threads."""
    return {"parallel": host_parallel(ctx), "products": gemm_split(ctx.backend)}


def _im2col_forward(ctx: KernelContext) -> Any:
    return conv_records.im2col_kernel(ctx, **_host_tuning(ctx))


def _im2col_grad_filter(ctx: KernelContext) -> Any:
    return conv_records.im2col_grad_filter_kernel(ctx, **_host_tuning(ctx))


_IM2COL = {conv_records.CONV2D.name: _im2col_forward,
           conv_records.CONV2D_BIAS.name: _im2col_forward,
           conv_records.CONV2D_GRAD_DATA.name: conv_records.im2col_grad_data_kernel,
           conv_records.CONV2D_GRAD_FILTER.name: _im2col_grad_filter}


KERNEL_BUILDERS = {
    conv_records.CONV2D.name: conv_kernel,
    conv_records.CONV2D_BIAS.name: conv_kernel,
    conv_records.CONV2D_GRAD_DATA.name: grad_data_kernel,
    conv_records.CONV2D_GRAD_FILTER.name: grad_filter_kernel,
    conv_records.CONV2D_BIAS_POOL.name: conv_bias_pool_kernel,
}
