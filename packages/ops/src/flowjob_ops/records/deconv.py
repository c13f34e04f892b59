"""``deconv2d``: the 2-D transposed convolution of legacy ``flow.nn.conv2d_transpose``.

``deconv2d(value, weight)`` is, value for value, the data gradient of a convolution whose input
has shape ``x_shape`` (the requested output) and whose output has ``value``'s shape: the same
attributes (``strides``, ``padding``, ``data_format``, ``dilations``, ``groups``) and weight
layout as ``conv2d`` ((F, C/groups, kh, kw) for NCHW, F being value's channels). So it runs the 2-D
im2col data-gradient kernel (``kernels.conv2d_grad_data``); unlike that gradient node it is differentiable:

* d value = conv2d(dy, weight): the transpose of the transpose;
* d weight = conv2d_grad_filter(dy, value): the filter gradient of that convolution, with dy in
  the place of its input and value in the place of its output gradient.

Output rows that no window reaches (legacy ``output_padding``) are zero, as legacy's.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.records.common import require_floating, same_dtype
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData

_CONV_KEYS = ("strides", "padding", "data_format", "dilations", "groups")


def _geometry(x_shape: Sequence[int], w_shape: Sequence[int], attrs: dict) -> ConvGeometry:
    dilations = attrs.get("dilations")
    return ConvGeometry.create(x_shape, w_shape, attrs.get("strides", 1), attrs.get("padding", "VALID"),
                                    1 if dilations is None else dilations, attrs.get("groups", 1),
                                    attrs.get("data_format", "NCHW"))


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    value, w = inputs
    require_floating(inputs, "deconv2d")
    dtype = same_dtype(inputs, "deconv2d")
    if "x_shape" not in attrs:
        raise ShapeError("deconv2d needs the attribute x_shape (the output shape)")
    out_shape = tuple(int(v) for v in attrs["x_shape"])
    geom = _geometry(out_shape, w.shape, attrs)
    if geom.y_shape != tuple(value.shape):
        raise ShapeError(f"deconv2d: output shape {out_shape} with filter {tuple(w.shape)} takes a value of shape "
                         f"{geom.y_shape} (the convolution of the output), got {tuple(value.shape)}")
    return [BlobSpec(out_shape, dtype)]


def _kernel(ctx: KernelContext) -> Any:
    value, w = ctx.inputs
    return Conv2dBackwardData(ctx.xp, _geometry(tuple(ctx.attrs["x_shape"]), w.shape, ctx.attrs), value.dtype,
                              out=ctx.out(0), scratch=ctx.scratch)


def _grad(ctx: GradContext) -> list[Any]:
    value, w = ctx.inputs
    attrs = {k: ctx.attrs[k] for k in _CONV_KEYS if k in ctx.attrs}
    d_value = ctx.apply("conv2d", [ctx.dy, w], attrs) if ctx.needs[0] else None
    d_w = None
    if ctx.needs[1]:
        d_w = ctx.apply("conv2d_grad_filter", [ctx.dy, value],
                        attrs | {"x_shape": tuple(ctx.attrs["x_shape"]), "w_shape": w.shape})
    return [d_value, d_w]


DECONV2D = OpDef("deconv2d", _infer, kernel=_kernel, grad=_grad,
                 doc="inputs (value, weight), attribute x_shape (the output): 2-D transposed convolution, the "
                     "data gradient of conv2d with the same attributes", compute=Compute(amp="black"))

OPS = (DECONV2D,)
