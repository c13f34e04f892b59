"""Convolution and its two gradients: 2-D, whose reference kernels are im2col + GEMM
(``flowjob_ops.kernels.conv``), which every backend can run, and 3-D (legacy v0.4 ``flow.nn.conv3d``) on
the N-d reference kernels of ``kernels.conv3d``.

Attributes: ``strides``, ``padding`` ("SAME" = "SAME_LOWER" as legacy, "SAME_UPPER", "VALID" or
explicit pads; see ``kernels.padding``), ``data_format`` ("NCHW" or "NHWC"), ``dilations`` and
``groups``. Weights are (F, C/groups, kh, kw) for NCHW and (F, kh, kw, C/groups) for NHWC, as
in legacy OneFlow. The kernels write into the planned output buffers and take their temporaries
from the plan's scratch pool (``KernelContext.scratch``).

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

The cpu backend overrides these kernels with Winograd where it pays (``flowjob_ops.overrides.cpu.conv``,
``FLOWJOB_CONV_ALGORITHM``); its kernels share the forward's transformed input the same way.

The 3-D op takes ``strides`` and ``dilations`` as an int or 1 or 3 ints; ``padding`` as "SAME"
(= "SAME_LOWER" as legacy), "SAME_LOWER", "SAME_UPPER", "VALID", 3 spatial (before, after) pairs, or 5
per-dimension pairs in ``data_format`` order; ``data_format`` "NCDHW" or "NDHWC"; ``groups``. Filters
are (F, C/groups, kd, kh, kw) for NCDHW and (F, kd, kh, kw, C/groups) for NDHWC. Its gradient ops take
the forward's attributes plus the shape of what they produce (``x_shape`` / ``w_shape``); the filter
gradient's ``forward`` attribute names the convolution node whose column matrix it reuses, as in 2-D.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.kernels import conv, conv3d
from flowjob_ops.records.common import require_floating, same_dtype, shape_error
from flowjob_ops.records.pool import output_shape


def _product(shape: Sequence[int]) -> int:
    total = 1
    for d in shape:
        total *= int(d)
    return total


def conv_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """Multiply-adds of a convolution, twice (``OpDef.flops``): each output element sums over one filter's
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


def geometry(x_shape: Sequence[int], w_shape: Sequence[int], attrs: dict) -> conv.ConvGeometry:
    """The validated geometry; its ValueErrors name the argument and value at fault."""
    dilations = attrs.get("dilations")
    return conv.ConvGeometry.create(x_shape, w_shape, attrs.get("strides", 1), attrs.get("padding", "VALID"),
                                    1 if dilations is None else dilations, attrs.get("groups", 1),
                                    attrs.get("data_format", "NCHW"))


def kernel_options(attrs: dict) -> dict[str, Any]:
    """The geometry keywords of the conv2d kernel classes, from the node's attributes."""
    dilations = attrs.get("dilations")
    return {"strides": attrs.get("strides", 1), "pads": attrs.get("padding", "VALID"),
            "dilation": 1 if dilations is None else dilations, "groups": attrs.get("groups", 1),
            "data_format": attrs.get("data_format", "NCHW")}


def _conv_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, w = inputs
    require_floating(inputs, "conv2d")
    dtype = same_dtype(inputs, "conv2d")
    return [BlobSpec(geometry(x.shape, w.shape, attrs).y_shape, dtype)]


class _Columns:
    """The forward kernel's im2col buffer and the input array it was last filled from."""

    __slots__ = ("im2col", "source")

    def __init__(self, im2col: Any) -> None:
        self.im2col = im2col
        self.source: Any = None


KEEP_COLUMNS_BYTES = 256 * 2**20
"""How many bytes of im2col matrices a train plan keeps from its forward convolutions for their
filter gradients; the others are rebuilt (a matrix costs about 0.15-0.35 ms per MB to rebuild)."""

_KEPT = ("conv2d-columns", "kept bytes")  # the plan's running total, in its shared kernel dict


def _keeps_columns(ctx: KernelContext, x: BlobSpec, w: BlobSpec) -> bool:
    """Whether this train-job forward keeps its matrix for the filter gradient (within the plan's budget)."""
    if not ctx.training:
        return False
    geom = geometry(x.shape, w.shape, ctx.attrs)
    nbytes = geom.M * geom.groups * geom.Kg * x.dtype.itemsize
    kept = ctx.shared.get(_KEPT, 0)
    if kept + nbytes > KEEP_COLUMNS_BYTES:
        return False
    ctx.shared[_KEPT] = kept + nbytes
    return True


def _conv_kernel(ctx: KernelContext) -> Any:
    x, w = ctx.inputs[:2]
    bias = ctx.op == "conv2d_bias"
    relu = bias and ctx.attrs.get("activation") == "relu"
    keep = _keeps_columns(ctx, x, w)
    forward = conv.Conv2dForward(ctx.xp, x.shape, w.shape, x.dtype, **kernel_options(ctx.attrs), bias=bias, relu=relu,
                                 strided_output=True, out=ctx.out(0), scratch=ctx.scratch,
                                 scratch_columns=not keep)
    if not keep:
        return forward
    # a filter-gradient node of this plan may reuse the matrix (see _grad_filter_kernel)
    columns = ctx.shared[("conv2d-columns", ctx.node_name)] = _Columns(forward.im2col)

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


def _grad_attrs(ctx: GradContext) -> dict[str, Any]:
    keys = ("strides", "padding", "data_format", "dilations", "groups")
    return {k: ctx.attrs[k] for k in keys if k in ctx.attrs} | {
        "x_shape": ctx.inputs[0].shape, "w_shape": ctx.inputs[1].shape}


def _conv_grad(ctx: GradContext) -> list[Any]:
    x, w = ctx.inputs
    attrs = _grad_attrs(ctx)
    dx = ctx.apply("conv2d_grad_data", [ctx.dy, w], attrs) if ctx.needs[0] else None
    dw = None
    if ctx.needs[1]:
        dw = ctx.apply("conv2d_grad_filter", [x, ctx.dy], attrs | {"forward": ctx.node.name})
    return [dx, dw]


# conv2d + bias_add (+ relu), made by the fusion pass (flowjob_ops.passes.fuse_conv) -----
ACTIVATIONS = (None, "relu")


def channel_axis(data_format: str) -> int:
    return 1 if padding_format(data_format) == "NCHW" else 3


def padding_format(data_format: Any) -> str:
    return conv.check_data_format(data_format if data_format is not None else "NCHW")


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


def conv_bias_pool(ctx: KernelContext, **tuning: Any) -> conv.Conv2dBiasPool:
    """The fused kernel of a ``conv2d_bias_pool`` node; ``tuning``: ``algorithm``, ``max_pool``."""
    x, w = ctx.inputs[:2]
    pool = _pool_attrs(ctx.attrs)
    return conv.Conv2dBiasPool(ctx.xp, x.shape, w.shape, x.dtype, **kernel_options(ctx.attrs),
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


def _check_dy(dy: BlobSpec, geom: conv.ConvGeometry) -> None:
    if dy.shape != geom.y_shape:
        raise ShapeError(f"conv2d output gradient has shape {dy.shape}, the convolution gives {geom.y_shape}")


def _grad_data_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, w = inputs
    _check_dy(dy, geometry(attrs["x_shape"], w.shape, attrs))
    return [BlobSpec(attrs["x_shape"], dy.dtype)]


def _grad_data_kernel(ctx: KernelContext) -> Any:
    dy, w = ctx.inputs
    return conv.Conv2dBackwardData(ctx.xp, ctx.attrs["x_shape"], w.shape, dy.dtype, **kernel_options(ctx.attrs),
                                   out=ctx.out(0), scratch=ctx.scratch)


def _grad_filter_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, dy = inputs
    _check_dy(dy, geometry(x.shape, attrs["w_shape"], attrs))
    return [BlobSpec(attrs["w_shape"], x.dtype)]


def _grad_filter_kernel(ctx: KernelContext) -> Any:
    x, dy = ctx.inputs
    options = kernel_options(ctx.attrs)
    geom = geometry(x.shape, ctx.attrs["w_shape"], ctx.attrs)
    columns = ctx.shared.get(("conv2d-columns", ctx.attrs.get("forward")))
    if columns is None or columns.im2col.geom != geom or columns.im2col.dtype != x.dtype:
        return conv.Conv2dBackwardFilter(ctx.xp, x.shape, ctx.attrs["w_shape"], x.dtype, **options,
                                         out=ctx.out(0), scratch=ctx.scratch)
    backward = conv.Conv2dBackwardFilter(ctx.xp, x.shape, ctx.attrs["w_shape"], x.dtype, **options,
                                         im2col=columns.im2col, out=ctx.out(0), scratch=ctx.scratch)

    def run(x_value: Any, dy_value: Any) -> Any:
        # the forward kernel's matrix is valid for this very array, which nothing writes before this node
        return backward(x_value, dy_value, reuse_cols=columns.source is x_value)

    return run


CONV2D = OpDef("conv2d", _conv_infer, kernel=_conv_kernel, flops=conv_flops, grad=_conv_grad, name_prefix="Conv2D",
               doc="inputs (x, weight): 2-D convolution (im2col + GEMM; Winograd on the cpu backend where it "
                   "pays)", amp="white")
CONV2D_GRAD_DATA = OpDef("conv2d_grad_data", _grad_data_infer, kernel=_grad_data_kernel, not_differentiable=True,
                         flops=conv_grad_data_flops,
                         name_prefix="Conv2DGradData", doc="inputs (dy, weight): d loss / d x")
CONV2D_GRAD_FILTER = OpDef("conv2d_grad_filter", _grad_filter_infer, kernel=_grad_filter_kernel,
                           flops=conv_grad_filter_flops,
                           not_differentiable=True, name_prefix="Conv2DGradFilter",
                           doc="inputs (x, dy): d loss / d weight")

CONV2D_BIAS = OpDef("conv2d_bias", _conv_bias_infer, kernel=_conv_kernel, flops=conv_flops, grad=_conv_bias_grad,
                    name_prefix="Conv2DBias",
                    doc="inputs (x, weight, bias): conv2d -> bias_add (-> relu with activation='relu') in one "
                        "kernel; made by the fusion pass", amp="white")

CONV2D_BIAS_POOL = OpDef("conv2d_bias_pool", _conv_bias_pool_infer, kernel=_conv_bias_pool_kernel, flops=conv_flops,
                         grad=_conv_bias_pool_grad, name_prefix="Conv2DBiasPool",
                         doc="inputs (x, weight, bias): conv2d_bias followed by max_pool2d (attributes pool_ksize, "
                             "pool_strides, pool_padding); bias and relu run at the pooled size; made by the "
                             "fusion pass when nothing else reads the activation", amp="white")


# 3-D convolution (legacy v0.4 flow.nn.conv3d), on kernels.conv3d -------------------------------------
_CONV3D_KEYS = ("strides", "padding", "data_format", "dilations", "groups")


def conv3d_geometry(op: str, x_shape: Sequence[int], w_shape: Sequence[int], attrs: dict) -> conv3d.ConvNdGeometry:
    """The validated geometry; its errors name the op, the argument and its value."""
    dilations = attrs.get("dilations")
    try:
        return conv3d.ConvNdGeometry.create(x_shape, w_shape, attrs.get("strides", 1), attrs.get("padding", "VALID"),
                                            1 if dilations is None else dilations, attrs.get("groups", 1),
                                            attrs.get("data_format", "NCDHW"))
    except ValueError as exc:
        raise shape_error(op, exc) from None


def _conv3d_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, w = inputs
    require_floating(inputs, "conv3d")
    dtype = same_dtype(inputs, "conv3d")
    return [BlobSpec(conv3d_geometry("conv3d", x.shape, w.shape, attrs).y_shape, dtype)]


class _SharedColumns3d:
    """A forward kernel's column builder and the input array it last read (see _conv3d_grad_filter_kernel)."""

    __slots__ = ("columns", "source")

    def __init__(self, columns: Any) -> None:
        self.columns = columns
        self.source: Any = None


def _conv3d_kernel(ctx: KernelContext) -> Any:
    x, w = ctx.inputs
    geom = conv3d_geometry("conv3d", x.shape, w.shape, ctx.attrs)
    forward = conv3d.ConvNdForward(ctx.xp, geom, x.dtype, ctx.out(0))
    if not ctx.training:
        return forward
    # the filter-gradient node of this plan reuses the column matrix instead of building it again
    shared = ctx.shared[("conv3d-columns", ctx.node_name)] = _SharedColumns3d(forward.columns)

    def run(x_value: Any, w_value: Any) -> Any:
        y = forward(x_value, w_value)
        shared.source = x_value
        return y

    return run


def _conv3d_grad(ctx: GradContext) -> list[Any]:
    x, w = ctx.inputs
    attrs = {k: ctx.attrs[k] for k in _CONV3D_KEYS if k in ctx.attrs} | {"x_shape": x.shape, "w_shape": w.shape}
    dx = ctx.apply("conv3d_grad_data", [ctx.dy, w], attrs) if ctx.needs[0] else None
    dw = None
    if ctx.needs[1]:
        dw = ctx.apply("conv3d_grad_filter", [x, ctx.dy], attrs | {"forward": ctx.node.name})
    return [dx, dw]


def _check_dy3d(op: str, dy: BlobSpec, geom: conv3d.ConvNdGeometry) -> None:
    if tuple(dy.shape) != geom.y_shape:
        raise ShapeError(f"{op}: the output gradient has shape {tuple(dy.shape)}, the convolution gives "
                         f"{geom.y_shape}")


def _conv3d_grad_data_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, w = inputs
    require_floating(inputs, "conv3d_grad_data")
    geom = conv3d_geometry("conv3d_grad_data", attrs["x_shape"], w.shape, attrs)
    _check_dy3d("conv3d_grad_data", dy, geom)
    return [BlobSpec(geom.x_shape, same_dtype(inputs, "conv3d_grad_data"))]


def _conv3d_grad_data_kernel(ctx: KernelContext) -> Any:
    dy, w = ctx.inputs
    geom = conv3d_geometry("conv3d_grad_data", ctx.attrs["x_shape"], w.shape, ctx.attrs)
    return conv3d.ConvNdBackwardData(ctx.xp, geom, dy.dtype, ctx.out(0))


def _conv3d_grad_filter_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, dy = inputs
    require_floating(inputs, "conv3d_grad_filter")
    geom = conv3d_geometry("conv3d_grad_filter", x.shape, attrs["w_shape"], attrs)
    _check_dy3d("conv3d_grad_filter", dy, geom)
    return [BlobSpec(geom.w_shape, same_dtype(inputs, "conv3d_grad_filter"))]


def _conv3d_grad_filter_kernel(ctx: KernelContext) -> Any:
    x, dy = ctx.inputs
    geom = conv3d_geometry("conv3d_grad_filter", x.shape, ctx.attrs["w_shape"], ctx.attrs)
    shared = ctx.shared.get(("conv3d-columns", ctx.attrs.get("forward")))
    if shared is None or shared.columns.geom != geom or shared.columns.dtype != x.dtype:
        return conv3d.ConvNdBackwardFilter(ctx.xp, geom, x.dtype, ctx.out(0))
    backward = conv3d.ConvNdBackwardFilter(ctx.xp, geom, x.dtype, ctx.out(0), columns=shared.columns)

    def run(x_value: Any, dy_value: Any) -> Any:
        # the forward node ran first in this step; its matrix holds this very array, which nothing
        # writes before this node reads it
        return backward(x_value, dy_value, reuse_cols=shared.source is x_value)

    return run


CONV3D = OpDef("conv3d", _conv3d_infer, kernel=_conv3d_kernel, grad=_conv3d_grad, name_prefix="Conv3d",
               flops=conv_flops,
               doc="inputs (x, weight): 3-D convolution (im2col + one batched GEMM over the groups)", amp="black")


CONV3D_GRAD_DATA = OpDef("conv3d_grad_data", _conv3d_grad_data_infer, kernel=_conv3d_grad_data_kernel,
                         flops=conv_grad_data_flops,
                         not_differentiable=True, name_prefix="Conv3dGradData", doc="inputs (dy, weight): d loss / d x")


CONV3D_GRAD_FILTER = OpDef("conv3d_grad_filter", _conv3d_grad_filter_infer, kernel=_conv3d_grad_filter_kernel,
                           flops=conv_grad_filter_flops,
                           not_differentiable=True, name_prefix="Conv3dGradFilter",
                           doc="inputs (x, dy): d loss / d weight")

OPS = (CONV2D, CONV2D_GRAD_DATA, CONV2D_GRAD_FILTER, CONV2D_BIAS, CONV2D_BIAS_POOL, CONV3D, CONV3D_GRAD_DATA,
       CONV3D_GRAD_FILTER)
