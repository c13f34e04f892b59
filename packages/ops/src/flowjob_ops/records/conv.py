"""Convolution and its two gradients, one record family for every rank: ``conv2d`` (also under
``flow.nn.conv1d``, on a height of 1) and ``conv3d`` (legacy v0.4 ``flow.nn.conv3d``), each with
``<op>_grad_data`` and ``<op>_grad_filter``. The rank is the input's (the op's name says which one it
accepts); the reference kernels are the rank-generic im2col + GEMM of ``flowjob_ops.kernels.conv``, which
every backend can run. The cpu backend overrides the 2-D ones (``flowjob_ops.overrides.cpu.conv``: 1x1
products, Winograd, or the 2-D im2col of ``kernels.conv2d_forward`` with its strided outputs).

Attributes: ``strides`` and ``dilations`` (an int, or 1 or rank ints), ``padding`` ("SAME" = "SAME_LOWER"
as legacy, "SAME_LOWER", "SAME_UPPER", "VALID", an int, rank spatial entries or rank + 2 per-dimension
pairs in ``data_format`` order; see ``kernels.window``), ``data_format`` (channels first by default:
"NCHW", "NCDHW"; or channels last) and ``groups``. Weights are (F, C/groups, *ksize) channels first and
(F, *ksize, C/groups) channels last, as in legacy OneFlow. The gradient ops take the forward's attributes
plus the shape of what they produce (``x_shape`` / ``w_shape``).

The filter gradient needs the im2col matrix of x, which the forward kernel has just built:
the gradient rule names the forward node in the filter-gradient node's ``forward`` attribute,
the forward kernel (of a train job) publishes its column buffer in the plan's shared kernel
dict, and the filter-gradient kernel reuses that buffer whenever the forward kernel last read
the very array it is given (in a step the forward node always runs first; otherwise,
e.g. when the forward output was dropped as dead code, it builds the matrix itself).
A kept matrix holds memory from the forward to the backward pass, so a plan keeps them only up
to ``KEEP_COLUMNS_BYTES`` (in build order, i.e. forward order); past that the forward builds
its matrix in scratch memory and the filter gradient builds it again, as PyTorch does (ResNet-50
at batch 16: 871 MB of matrices, about 140 ms of im2col copies per step to rebuild them all).

The fused 2-D ops the fusion pass makes (``conv2d_bias``, ``conv2d_bias_pool``) run the 2-D im2col
kernels (``kernels.conv2d_*``, with the bias and ReLU in the GEMM's epilogue) on every backend; the
``im2col_*`` builders here are theirs and the cpu override's.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops import layout_rules
from flowjob_ops.kernels import (conv, conv2d_bias_pool, conv2d_forward, conv2d_geometry, conv2d_grad_data,
                                 conv2d_grad_filter, window2d)
from flowjob_ops.kernels.window import FORMATS
from flowjob_ops.records.common import require_floating, same_dtype
from flowjob_ops.records.pool import output_shape

GRAD_KEYS = ("strides", "padding", "data_format", "dilations", "groups")

def _product(shape: Sequence[int]) -> int:
    total = 1
    for d in shape:
        total *= int(d)
    return total


def conv_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """Multiply-adds of a convolution, twice (``OpDef.compute.flops``): each output element sums over one filter's
    window, ``weight.shape[1:]``; a pooled output (conv2d_bias_pool) stands for ``pool_ksize`` times as many."""
    pool = attrs.get("pool_ksize")
    pooled = _product(pool) if isinstance(pool, (list, tuple)) else 1
    return 2.0 * _product(outputs[0].shape) * pooled * _product(inputs[1].shape[1:])


def conv_grad_data_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """As the forward's: inputs (dy, weight)."""
    return 2.0 * _product(inputs[0].shape) * _product(inputs[1].shape[1:])


def conv_grad_filter_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """As the forward's: inputs (x, dy), the output has the weight's shape."""
    return 2.0 * _product(inputs[1].shape) * _product(outputs[0].shape[1:])


def conv_geometry(op: str, x_shape: Sequence[int], w_shape: Sequence[int], attrs: dict,
                  rank: int) -> conv.ConvGeometry:
    """The validated geometry of a ``rank``-d convolution; its errors name the argument and its value (the tracer
    adds the op)."""
    fmt = attrs.get("data_format", FORMATS[rank][0])
    if len(x_shape) != rank + 2:
        raise ShapeError(f"{op} needs a {rank + 2}-d {fmt} input, got shape {tuple(x_shape)}")
    dilations = attrs.get("dilations")
    try:
        return conv.ConvGeometry.create(x_shape, w_shape, attrs.get("strides", 1), attrs.get("padding", "VALID"),
                                        1 if dilations is None else dilations, attrs.get("groups", 1), fmt)
    except ValueError as exc:  # the tracer's error names the op
        raise ShapeError(str(exc)) from None


def _grad_attrs(ctx: GradContext) -> dict[str, Any]:
    return {k: ctx.attrs[k] for k in GRAD_KEYS if k in ctx.attrs} | {
        "x_shape": ctx.inputs[0].shape, "w_shape": ctx.inputs[1].shape}


class _SharedColumns:
    """A forward kernel's column builder and the input array it last read (see the filter gradient)."""

    __slots__ = ("columns", "source")

    def __init__(self, columns: Any) -> None:
        self.columns = columns
        self.source: Any = None


def conv_records(rank: int, prefix: str, amp: str) -> tuple[OpDef, OpDef, OpDef]:
    """The forward, data-gradient and filter-gradient records of the ``rank``-d convolution."""
    name = f"conv{rank}d"
    data_name, filter_name = f"{name}_grad_data", f"{name}_grad_filter"

    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        x, w = inputs
        require_floating(inputs, name)
        dtype = same_dtype(inputs, name)
        return [BlobSpec(conv_geometry(name, x.shape, w.shape, attrs, rank).y_shape, dtype)]

    def kernel(ctx: KernelContext) -> Any:
        x, w = ctx.inputs
        geom = conv_geometry(name, x.shape, w.shape, ctx.attrs, rank)
        keep = keeps_columns(ctx, geom.positions * geom.C * geom.taps * x.dtype.itemsize)
        forward = conv.ConvForward(ctx.xp, geom, x.dtype, ctx.out(0), alloc=ctx.scratch, keep_columns=keep)
        if not keep:
            return forward
        # the filter-gradient node of this plan reuses the column matrix instead of building it again
        shared = ctx.shared[("conv-columns", ctx.node_name)] = _SharedColumns(forward.columns)

        def run(x_value: Any, w_value: Any) -> Any:
            y = forward(x_value, w_value)
            shared.source = x_value
            return y

        return run

    def grad(ctx: GradContext) -> list[Any]:
        x, w = ctx.inputs
        attrs = _grad_attrs(ctx)
        dx = ctx.apply(data_name, [ctx.dy, w], attrs) if ctx.needs[0] else None
        dw = ctx.apply(filter_name, [x, ctx.dy], attrs | {"forward": ctx.node.name}) if ctx.needs[1] else None
        return [dx, dw]

    def check_dy(op: str, dy: BlobSpec, geom: conv.ConvGeometry) -> None:
        if tuple(dy.shape) != geom.y_shape:
            raise ShapeError(f"{op}: the output gradient has shape {tuple(dy.shape)}, the convolution gives "
                             f"{geom.y_shape}")

    def data_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        dy, w = inputs
        require_floating(inputs, data_name)
        geom = conv_geometry(data_name, attrs["x_shape"], w.shape, attrs, rank)
        check_dy(data_name, dy, geom)
        return [BlobSpec(geom.x_shape, same_dtype(inputs, data_name))]

    def data_kernel(ctx: KernelContext) -> Any:
        dy, w = ctx.inputs
        geom = conv_geometry(data_name, ctx.attrs["x_shape"], w.shape, ctx.attrs, rank)
        return conv.ConvBackwardData(ctx.xp, geom, dy.dtype, ctx.out(0), alloc=ctx.scratch)

    def filter_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        x, dy = inputs
        require_floating(inputs, filter_name)
        geom = conv_geometry(filter_name, x.shape, attrs["w_shape"], attrs, rank)
        check_dy(filter_name, dy, geom)
        return [BlobSpec(geom.w_shape, same_dtype(inputs, filter_name))]

    def filter_kernel(ctx: KernelContext) -> Any:
        x, dy = ctx.inputs
        geom = conv_geometry(filter_name, x.shape, ctx.attrs["w_shape"], ctx.attrs, rank)
        shared = ctx.shared.get(("conv-columns", ctx.attrs.get("forward")))
        if shared is None or shared.columns.geom != geom or shared.columns.dtype != x.dtype:
            return conv.ConvBackwardFilter(ctx.xp, geom, x.dtype, ctx.out(0), alloc=ctx.scratch)
        backward = conv.ConvBackwardFilter(ctx.xp, geom, x.dtype, ctx.out(0), columns=shared.columns,
                                           alloc=ctx.scratch)

        def run(x_value: Any, dy_value: Any) -> Any:
            # the forward node ran first in this step; its matrix holds this very array, which nothing
            # writes before this node reads it
            return backward(x_value, dy_value, reuse_cols=shared.source is x_value)

        return run

    forward = OpDef(name, infer, kernel=kernel, grad=grad,
                    doc=f"inputs (x, weight): {rank}-D convolution (im2col + one batched GEMM over the groups)",
                    compute=Compute(flops=conv_flops, amp=amp, host_split=True, layouts=layout_rules.conv),
                    legacy=LegacyFace(name_prefix=prefix))
    data = OpDef(data_name, data_infer, kernel=data_kernel, not_differentiable=True,
                 doc="inputs (dy, weight): d loss / d x",
                 compute=Compute(flops=conv_grad_data_flops, host_split=True, layouts=layout_rules.conv_grad_data),
                 legacy=LegacyFace(name_prefix=f"{prefix}GradData"))
    filters = OpDef(filter_name, filter_infer, kernel=filter_kernel, not_differentiable=True,
                    doc="inputs (x, dy): d loss / d weight",
                    compute=Compute(flops=conv_grad_filter_flops, host_split=True,
                                    layouts=layout_rules.conv_grad_filter),
                    legacy=LegacyFace(name_prefix=f"{prefix}GradFilter"))
    return forward, data, filters


# the 2-D im2col kernels (kernels.conv2d_*): the fused ops' and the cpu backend's -----------------------
def geometry(x_shape: Sequence[int], w_shape: Sequence[int], attrs: dict) -> conv2d_geometry.ConvGeometry:
    """The validated 2-D im2col geometry; its ValueErrors name the argument and value at fault."""
    dilations = attrs.get("dilations")
    return conv2d_geometry.ConvGeometry.create(x_shape, w_shape, attrs.get("strides", 1),
                                               attrs.get("padding", "VALID"), 1 if dilations is None else dilations,
                                               attrs.get("groups", 1), attrs.get("data_format", "NCHW"))


class _Im2colColumns:
    """The 2-D forward kernel's im2col buffer and the input array it was last filled from."""

    __slots__ = ("im2col", "source")

    def __init__(self, im2col: Any) -> None:
        self.im2col = im2col
        self.source: Any = None


KEEP_COLUMNS_BYTES = 256 * 2**20
"""How many bytes of im2col matrices a train plan keeps from its forward convolutions for their
filter gradients; the others are rebuilt (a matrix costs about 0.15-0.35 ms per MB to rebuild)."""

_KEPT = ("conv2d-columns", "kept bytes")  # the plan's running total, in its shared kernel dict


def keeps_columns(ctx: KernelContext, nbytes: int) -> bool:
    """Whether this train-job forward keeps its matrix of ``nbytes`` for the filter gradient (within the plan's
    budget, shared by the convolutions of every rank)."""
    if not ctx.training:
        return False
    kept = ctx.shared.get(_KEPT, 0)
    if kept + nbytes > KEEP_COLUMNS_BYTES:
        return False
    ctx.shared[_KEPT] = kept + nbytes
    return True


def im2col_kernel(ctx: KernelContext, **tuning: Any) -> Any:
    """conv2d and conv2d_bias (with its optional ReLU) by the 2-D im2col. ``tuning``: ``parallel`` (the copies
    in parts over the batch) and ``products`` (the GEMMs cut over the host threads), which the cpu override
    (``flowjob_ops.overrides.cpu.conv``) passes; the record runs each as one call."""
    x, w = ctx.inputs[:2]
    bias = ctx.op == "conv2d_bias"
    relu = bias and ctx.attrs.get("activation") == "relu"
    geom = geometry(x.shape, w.shape, ctx.attrs)
    keep = keeps_columns(ctx, geom.M * geom.groups * geom.Kg * x.dtype.itemsize)
    forward = conv2d_forward.Conv2dForward(ctx.xp, geom, x.dtype, bias=bias, relu=relu, strided_output=True,
                                           out=ctx.out(0), scratch=ctx.scratch, scratch_columns=not keep, **tuning)
    if not keep:
        return forward
    # a filter-gradient node of this plan may reuse the matrix (see im2col_grad_filter_kernel)
    columns = ctx.shared[("conv2d-columns", ctx.node_name)] = _Im2colColumns(forward.im2col)

    if bias:
        def run_bias(x_value: Any, w_value: Any, b_value: Any) -> Any:
            y = forward(x_value, w_value, b_value)
            columns.source = x_value
            return y

        return run_bias

    def run(x_value: Any, w_value: Any) -> Any:
        y = forward(x_value, w_value)
        columns.source = x_value
        return y

    return run


# conv2d + bias_add (+ relu), made by the fusion pass (flowjob_ops.passes.fuse_conv) -----
ACTIVATIONS = (None, "relu")


def channel_axis(data_format: str) -> int:
    return 1 if padding_format(data_format) == "NCHW" else 3


def padding_format(data_format: Any) -> str:
    return window2d.check_data_format(data_format if data_format is not None else "NCHW")


def _conv_bias_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, w, b = inputs
    require_floating(inputs, "conv2d_bias")
    dtype = same_dtype(inputs, "conv2d_bias")
    if attrs.get("activation") not in ACTIVATIONS:
        raise ShapeError(f"conv2d_bias activation must be one of {ACTIVATIONS}, got {attrs.get('activation')!r}")
    y = geometry(x.shape, w.shape, attrs).y_shape
    channels = y[channel_axis(attrs.get("data_format", "NCHW"))]
    if b.shape != (channels,):
        raise ShapeError(f"conv2d_bias: bias must have shape ({channels},), got {b.shape}")
    return [BlobSpec(y, dtype)]


def _conv_bias_grad(ctx: GradContext) -> list[Any]:
    x, w, b = ctx.inputs
    dz = ctx.dy
    if ctx.attrs.get("activation") == "relu":
        dz = ctx.apply("relu_grad", [ctx.outputs[0], ctx.dy])
    axis = channel_axis(ctx.attrs.get("data_format", "NCHW"))
    attrs = _grad_attrs(ctx)
    dx = ctx.apply("conv2d_grad_data", [dz, w], attrs) if ctx.needs[0] else None
    dw = ctx.apply("conv2d_grad_filter", [x, dz], attrs | {"forward": ctx.node.name}) if ctx.needs[1] else None
    db = None
    if ctx.needs[2]:
        db = ctx.apply("reduce_sum", [dz], {"axis": [i for i in range(4) if i != axis], "keepdims": False})
    return [dx, dw, db]


# conv2d_bias -> max_pool2d, made by the fusion pass when nothing else reads the activation -----
POOL_KEYS = ("pool_ksize", "pool_strides", "pool_padding")


def _pool_attrs(attrs: dict) -> dict[str, Any]:
    return {"ksize": attrs["pool_ksize"], "strides": attrs["pool_strides"],
            "padding": attrs.get("pool_padding", "VALID"), "data_format": attrs.get("data_format", "NCHW")}


def conv_attrs(attrs: dict) -> dict[str, Any]:
    """A ``conv2d_bias_pool`` node's convolution attributes (without the pooling ones)."""
    return {k: v for k, v in attrs.items() if k not in POOL_KEYS}


def _conv_bias_pool_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (act,) = _conv_bias_infer(inputs, conv_attrs(attrs))
    return [BlobSpec(output_shape(act.shape, _pool_attrs(attrs)), act.dtype)]


def conv_bias_pool(ctx: KernelContext, **tuning: Any) -> conv2d_bias_pool.Conv2dBiasPool:
    """The fused kernel of a ``conv2d_bias_pool`` node; ``tuning``: ``algorithm``, ``max_pool``."""
    x, w = ctx.inputs[:2]
    pool = _pool_attrs(ctx.attrs)
    return conv2d_bias_pool.Conv2dBiasPool(ctx.xp, geometry(x.shape, w.shape, ctx.attrs), x.dtype,
                                           pool=(pool["ksize"], pool["strides"], pool["padding"]),
                                           relu=ctx.attrs.get("activation") == "relu", **tuning)


def _conv_bias_pool_kernel(ctx: KernelContext) -> Any:
    return conv_bias_pool(ctx)


def _conv_bias_pool_grad(ctx: GradContext) -> list[Any]:
    # recompute the activation (the fused node never kept it), then the unfused chain's gradients
    x, w, b = ctx.inputs
    act = ctx.apply("conv2d_bias", [x, w, b], conv_attrs(ctx.attrs))
    # pool the recomputed activation again: the pooling gradient finds each window's maximum by
    # equality with the pooled value, and the fused kernel's own output may round differently
    # (another summation order), which would drop those windows' gradients
    pooled = ctx.apply("max_pool2d", [act], _pool_attrs(ctx.attrs))
    dact = ctx.apply("max_pool2d_grad", [act, pooled, ctx.dy], _pool_attrs(ctx.attrs))
    dz = ctx.apply("relu_grad", [act, dact]) if ctx.attrs.get("activation") == "relu" else dact
    axis = channel_axis(ctx.attrs.get("data_format", "NCHW"))
    attrs = _grad_attrs(ctx)
    dx = ctx.apply("conv2d_grad_data", [dz, w], attrs) if ctx.needs[0] else None
    dw = ctx.apply("conv2d_grad_filter", [x, dz], attrs) if ctx.needs[1] else None
    db = None
    if ctx.needs[2]:
        db = ctx.apply("reduce_sum", [dz], {"axis": [i for i in range(4) if i != axis], "keepdims": False})
    return [dx, dw, db]


def im2col_grad_data_kernel(ctx: KernelContext) -> Any:
    dy, w = ctx.inputs
    return conv2d_grad_data.Conv2dBackwardData(ctx.xp, geometry(ctx.attrs["x_shape"], w.shape, ctx.attrs), dy.dtype,
                                               out=ctx.out(0), scratch=ctx.scratch)


def im2col_grad_filter_kernel(ctx: KernelContext, **tuning: Any) -> Any:
    """conv2d_grad_filter by the 2-D im2col, reusing its forward's matrix where it can; ``tuning`` as for
    ``im2col_kernel``."""
    x, dy = ctx.inputs
    geom = geometry(x.shape, ctx.attrs["w_shape"], ctx.attrs)
    columns = ctx.shared.get(("conv2d-columns", ctx.attrs.get("forward")))
    if columns is None or columns.im2col.geom != geom or columns.im2col.dtype != x.dtype:
        return conv2d_grad_filter.Conv2dBackwardFilter(ctx.xp, geom, x.dtype, out=ctx.out(0), scratch=ctx.scratch,
                                                       **tuning)
    backward = conv2d_grad_filter.Conv2dBackwardFilter(ctx.xp, geom, x.dtype, im2col=columns.im2col, out=ctx.out(0),
                                                       scratch=ctx.scratch, **tuning)

    def run(x_value: Any, dy_value: Any) -> Any:
        # the forward kernel's matrix is valid for this very array, which nothing writes before this node
        return backward(x_value, dy_value, reuse_cols=columns.source is x_value)

    return run


CONV2D, CONV2D_GRAD_DATA, CONV2D_GRAD_FILTER = conv_records(2, "Conv2D", "white")
CONV3D, CONV3D_GRAD_DATA, CONV3D_GRAD_FILTER = conv_records(3, "Conv3d", "black")

CONV2D_BIAS = OpDef("conv2d_bias", _conv_bias_infer, kernel=im2col_kernel, grad=_conv_bias_grad,
                    doc="inputs (x, weight, bias): conv2d -> bias_add (-> relu with activation='relu') in one "
                        "kernel; made by the fusion pass",
                    compute=Compute(flops=conv_flops, host_split=True, amp="white"),
                    legacy=LegacyFace(name_prefix="Conv2DBias"))

CONV2D_BIAS_POOL = OpDef("conv2d_bias_pool", _conv_bias_pool_infer, kernel=_conv_bias_pool_kernel,
                         grad=_conv_bias_pool_grad,
                         doc="inputs (x, weight, bias): conv2d_bias followed by max_pool2d (attributes pool_ksize, "
                             "pool_strides, pool_padding); bias and relu run at the pooled size; made by the "
                             "fusion pass when nothing else reads the activation",
                         compute=Compute(flops=conv_flops, host_split=True, amp="white"),
                         legacy=LegacyFace(name_prefix="Conv2DBiasPool"))


OPS = (CONV2D, CONV2D_GRAD_DATA, CONV2D_GRAD_FILTER, CONV2D_BIAS, CONV2D_BIAS_POOL, CONV3D, CONV3D_GRAD_DATA,
       CONV3D_GRAD_FILTER)
