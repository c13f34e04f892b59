"""flowjob ops as ONNX nodes: one converter per op type, for the ops ONNX has.

A converter gets the ``Emitter`` and the job's node and adds ONNX nodes computing the node's outputs from
its inputs, by value name (the lbn). Layouts ONNX lacks are met with transposes (NHWC convolutions and
pooling run as NCHW between two ``Transpose`` nodes); ``batch_norm`` (inference, parameters already
broadcast) becomes its arithmetic. An op without a converter is refused by the exporter, naming it.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export import onnx_array, onnx_elementwise, onnx_losses, onnx_nn, onnx_quantization
from flowjob_ops.export.onnx_emitter import Emitter
from flowjob_ops.kernels import window2d as padding  # the 2-D window geometry
from flowjob_ops.records.matmul import bias_axis

TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


Converter = Callable[[Emitter, Node], None]


def _simple(op_type: str, **fixed: Any) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        e.add(op_type, list(node.inputs), list(node.outputs), node.name, **fixed)

    return convert


NARROW_INTS = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16))


def _arithmetic(op_type: str) -> Converter:
    """Add, Sub, Mul, Div: before opset 14 they take no 8 or 16-bit integers, which go through int32 (and wrap
    back as the record's arithmetic does)."""

    def convert(e: Emitter, node: Node) -> None:
        dtype = e.dtype(node.outputs[0])
        if e.opset >= 14 or dtype not in NARROW_INTS:
            e.add(op_type, list(node.inputs), list(node.outputs), node.name)
            return
        wide = [e.add("Cast", [x], stem=node.name, to=e.tensor_type(np.int32)) for x in node.inputs]
        e.add("Cast", [e.add(op_type, wide, stem=node.name)], list(node.outputs), node.name,
              to=e.tensor_type(dtype))

    return convert


def _scalar(op_type: str, scalar_first: bool = False) -> Converter:
    """``x op scalar`` (``scalar op x`` for the reversed ones) with the scalar as a constant of x's dtype."""

    def convert(e: Emitter, node: Node) -> None:
        (x,) = node.inputs
        value = e.constant(node.attrs["scalar"], f"{node.name}/scalar", e.dtype(x))
        operands = [value, x] if scalar_first else [x, value]
        e.add(op_type, operands, list(node.outputs), node.name)

    return convert


def _last_two_swapped(e: Emitter, lbn: str, stem: str) -> str:
    rank = len(e.shape(lbn))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return e.add("Transpose", [lbn], stem=stem, perm=perm)


def _matmul(e: Emitter, node: Node) -> None:
    """matmul (alpha scaling); matmul_bias adds its bias (the fusion pass's op) and applies its relu."""
    a, b = node.inputs[:2]
    if node.attrs.get("transpose_a"):
        a = _last_two_swapped(e, a, node.name)
    if node.attrs.get("transpose_b"):
        b = _last_two_swapped(e, b, node.name)
    alpha = float(node.attrs.get("alpha", 1.0))
    (out,) = node.outputs
    fused = len(node.inputs) == 3
    if alpha == 1.0 and not fused:
        e.add("MatMul", [a, b], [out], node.name)
        return
    y = e.add("MatMul", [a, b], stem=node.name)
    if alpha != 1.0:
        y = e.add("Mul", [y, e.constant(alpha, f"{node.name}/alpha", e.dtype(out))], stem=node.name)
    if fused:
        y = _plus_bias(e, y, node.inputs[2], out, node.attrs.get("data_format"), node.name)
        if node.attrs.get("activation") == "relu":
            y = e.add("Relu", [y], stem=node.name)
    e.add("Identity", [y], [out], node.name)


def _plus_bias(e: Emitter, x: str, bias: str, like: str, data_format: Any, stem: str) -> str:
    """x + bias along bias_add's channel axis of ``like`` (the job's value x is shaped as)."""
    rank = len(e.shape(like))
    axis = bias_axis(data_format, rank) % rank
    shape = [e.shape(like)[axis] if i == axis else 1 for i in range(rank)]
    reshaped = e.add("Reshape", [bias, e.constant(shape, f"{stem}/bias_shape", np.int64)], stem=stem)
    return e.add("Add", [x, reshaped], stem=stem)


def _bias_add(e: Emitter, node: Node) -> None:
    x, bias = node.inputs
    e.add("Identity", [_plus_bias(e, x, bias, x, node.attrs.get("data_format"), node.name)], list(node.outputs),
          node.name)


def _reshape(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    target = e.shape(node.outputs[0])  # inference resolved -1 when the job was traced
    e.add("Reshape", [x, e.constant(list(target), f"{node.name}/shape", np.int64)], list(node.outputs), node.name)


def _transpose(e: Emitter, node: Node) -> None:
    perm = node.attrs.get("perm")
    rank = len(e.shape(node.inputs[0]))
    perm = list(range(rank))[::-1] if perm is None else [int(p) % rank for p in perm]  # None reverses, as numpy
    e.add("Transpose", list(node.inputs), list(node.outputs), node.name, perm=perm)


def _concat(e: Emitter, node: Node) -> None:
    rank = len(e.shape(node.outputs[0]))
    e.add("Concat", list(node.inputs), list(node.outputs), node.name, axis=int(node.attrs["axis"]) % rank)


def _softmax(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        e.softmax(op_type, node.inputs[0], int(node.attrs.get("axis", -1)), list(node.outputs), node.name)

    return convert


def _cast(e: Emitter, node: Node) -> None:
    to = e.onnx.helper.np_dtype_to_tensor_dtype(e.dtype(node.outputs[0]))
    e.add("Cast", list(node.inputs), list(node.outputs), node.name, to=to)


def _square(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    e.add("Mul", [x, x], list(node.outputs), node.name)


def _rsqrt(e: Emitter, node: Node) -> None:
    e.add("Reciprocal", [e.add("Sqrt", list(node.inputs), stem=node.name)], list(node.outputs), node.name)


def _relu6(e: Emitter, node: Node) -> None:
    e.clip(node.inputs[0], 0.0, 6.0, list(node.outputs), node.name)


def _clip(e: Emitter, node: Node) -> None:
    e.clip(node.inputs[0], node.attrs.get("min_value"), node.attrs.get("max_value"), list(node.outputs), node.name)


def _gelu(e: Emitter, node: Node) -> None:
    """x / 2 * (1 + erf(x / sqrt(2))), the exact form flowjob computes."""
    (x,) = node.inputs
    dtype = e.dtype(x)
    scaled = e.add("Mul", [x, e.constant(1.0 / np.sqrt(2.0), f"{node.name}/rsqrt2", dtype)], stem=node.name)
    one_plus = e.add("Add", [e.add("Erf", [scaled], stem=node.name), e.constant(1.0, f"{node.name}/one", dtype)],
                     stem=node.name)
    half = e.add("Mul", [x, e.constant(0.5, f"{node.name}/half", dtype)], stem=node.name)
    e.add("Mul", [half, one_plus], list(node.outputs), node.name)


def _elu(e: Emitter, node: Node) -> None:
    alpha, scale = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("scale", 1.0))
    if scale == 1.0:
        e.add("Elu", list(node.inputs), list(node.outputs), node.name, alpha=alpha)
        return
    e.add("Selu", list(node.inputs), list(node.outputs), node.name, alpha=alpha, gamma=scale)


def _pad(e: Emitter, node: Node) -> None:
    pads = [int(v) for v in node.attrs["padding_before"]] + [int(v) for v in node.attrs["padding_after"]]
    e.pad(node.inputs[0], pads, node.attrs.get("constant_value", 0), list(node.outputs), node.name)


def _gather(e: Emitter, node: Node) -> None:
    rank = len(e.shape(node.inputs[0]))
    e.add("Gather", list(node.inputs), list(node.outputs), node.name, axis=int(node.attrs.get("axis", 0)) % rank)


def _leaky_relu(e: Emitter, node: Node) -> None:
    e.add("LeakyRelu", list(node.inputs), list(node.outputs), node.name, alpha=float(node.attrs.get("alpha", 0.2)))


def _batch_norm(e: Emitter, node: Node) -> None:
    """(x - mean) / sqrt(variance + epsilon) * scale + offset, the parameters already broadcast against x."""
    x, mean, variance, *rest = node.inputs
    with_scale, with_offset = node.attrs.get("with_scale", True), node.attrs.get("with_offset", True)
    scale = rest.pop(0) if with_scale else None
    offset = rest.pop(0) if with_offset else None
    eps = e.constant(node.attrs["epsilon"], f"{node.name}/epsilon", e.dtype(x))
    std = e.add("Sqrt", [e.add("Add", [variance, eps], stem=node.name)], stem=node.name)
    y = e.add("Div", [e.add("Sub", [x, mean], stem=node.name), std], stem=node.name)
    if scale is not None:
        y = e.add("Mul", [y, scale], stem=node.name)
    if offset is not None:
        y = e.add("Add", [y, offset], stem=node.name)
    e.add("Identity", [y], list(node.outputs), node.name)


def _window_attrs(e: Emitter, x: str, attrs: dict, ksize: Any, dilation: Any = 1) -> tuple[str, dict]:
    fmt = padding.check_data_format(attrs.get("data_format", "NCHW"))
    ah, aw = padding.SPATIAL_AXES[fmt]
    shape = e.shape(x)
    window = padding.Window2d.create((shape[ah], shape[aw]), ksize, attrs.get("strides", 1), dilation,
                                     attrs.get("padding", "VALID"), fmt)
    (top, bottom), (left, right) = window.pads
    return fmt, {"kernel_shape": list(window.ksize), "strides": list(window.strides),
                 "pads": [top, left, bottom, right]}


def _in_nchw(e: Emitter, node: Node, fmt: str, run: Callable[[str], str]) -> None:
    """``run`` on the node's NCHW input; NHWC values are transposed in and out."""
    (out,) = node.outputs
    if fmt == "NCHW":
        e.add("Identity", [run(node.inputs[0])], [out], node.name)
        return
    nchw = e.add("Transpose", [node.inputs[0]], stem=node.name, perm=list(TO_NCHW))
    e.add("Transpose", [run(nchw)], [out], node.name, perm=list(TO_NHWC))


def _pool(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        fmt, attrs = _window_attrs(e, node.inputs[0], node.attrs, node.attrs["ksize"])
        e_attrs = dict(attrs)
        if op_type == "AveragePool":
            e_attrs["count_include_pad"] = 0  # the mean over the window's cells inside the input, as legacy
        _in_nchw(e, node, fmt, lambda x: e.add(op_type, [x], stem=node.name, **e_attrs))

    return convert


def _conv2d(e: Emitter, node: Node) -> None:
    """conv2d; conv2d_bias (the fusion pass's op) passes its bias as Conv's B and applies its relu."""
    x, w = node.inputs[:2]
    fmt = padding.check_data_format(node.attrs.get("data_format", "NCHW"))
    wshape = e.shape(w)
    kernel = (wshape[2], wshape[3]) if fmt == "NCHW" else (wshape[1], wshape[2])
    dilations = node.attrs.get("dilations")
    dilation = padding.normalize_pair(1 if dilations is None else dilations, "dilations")
    _, attrs = _window_attrs(e, x, node.attrs, kernel, dilation)
    attrs.update(dilations=list(dilation), group=int(node.attrs.get("groups", 1)))
    weights = w if fmt == "NCHW" else e.add("Transpose", [w], stem=node.name, perm=list(TO_NCHW))
    operands = [weights, *node.inputs[2:3]]  # the bias, one per output channel
    relu = node.attrs.get("activation") == "relu"

    def run(nchw: str) -> str:
        y = e.add("Conv", [nchw, *operands], stem=node.name, **attrs)
        return e.add("Relu", [y], stem=node.name) if relu else y

    _in_nchw(e, node, fmt, run)


def _deconv2d(e: Emitter, node: Node) -> None:
    """The data gradient of conv2d from x_shape to value's shape: ConvTranspose with the conv's pads, and
    output_padding making up the rows a strided conv dropped."""
    value, w = node.inputs
    fmt = padding.check_data_format(node.attrs.get("data_format", "NCHW"))
    ah, aw = padding.SPATIAL_AXES[fmt]
    wshape = e.shape(w)
    kernel = (wshape[2], wshape[3]) if fmt == "NCHW" else (wshape[1], wshape[2])
    dilations = node.attrs.get("dilations")
    dilation = padding.normalize_pair(1 if dilations is None else dilations, "dilations")
    out_shape = tuple(int(v) for v in node.attrs["x_shape"])
    window = padding.Window2d.create((out_shape[ah], out_shape[aw]), kernel, node.attrs.get("strides", 1), dilation,
                                     node.attrs.get("padding", "VALID"), fmt)
    (top, bottom), (left, right) = window.pads
    sizes_in = (e.shape(value)[ah], e.shape(value)[aw])
    extra = [out - (s * (n - 1) + (k - 1) * d + 1 - pb - pe) for out, s, n, k, d, pb, pe in zip(
        (out_shape[ah], out_shape[aw]), window.strides, sizes_in, window.ksize, dilation, (top, left),
        (bottom, right))]
    attrs = {"kernel_shape": list(window.ksize), "strides": list(window.strides), "dilations": list(dilation),
             "pads": [top, left, bottom, right], "group": int(node.attrs.get("groups", 1))}
    if any(extra):
        attrs["output_padding"] = extra
    weights = w if fmt == "NCHW" else e.add("Transpose", [w], stem=node.name, perm=list(TO_NCHW))
    _in_nchw(e, node, fmt, lambda nchw: e.add("ConvTranspose", [nchw, weights], stem=node.name, **attrs))


def _reduce(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        (x,) = node.inputs
        rank = len(e.shape(x))
        axis = node.attrs.get("axis")
        axes = list(range(rank)) if axis is None else sorted({int(a) % rank for a in np.atleast_1d(axis)})
        keep = bool(node.attrs.get("keepdims", False))
        onnx_shape = tuple(1 if keep else n for i, n in enumerate(e.shape(x)) if keep or i not in axes)
        (out,) = node.outputs
        if onnx_shape == e.shape(out):
            e.reduce(op_type, x, axes, keep, [out], node.name)
            return
        # the record's shape for a full reduction may differ from ONNX's (legacy gave (1,), not 0-d)
        reduced = e.reduce(op_type, x, axes, keep, None, node.name)
        e.add("Reshape", [reduced, e.constant(list(e.shape(out)), f"{node.name}/shape", np.int64)], [out], node.name)

    return convert


CONVERTERS: dict[str, Converter] = {
    "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"), "exp": _simple("Exp"),
    "log": _simple("Log"), "sqrt": _simple("Sqrt"), "abs": _simple("Abs"), "negative": _simple("Neg"),
    "floor": _simple("Floor"), "ceil": _simple("Ceil"), "reciprocal": _simple("Reciprocal"), "erf": _simple("Erf"),
    "sin": _simple("Sin"), "cos": _simple("Cos"), "sign": _simple("Sign"), "softplus": _simple("Softplus"),
    "identity": _simple("Identity"), "ccrelu": _simple("Relu"), "leaky_relu": _leaky_relu, "square": _square,
    "rsqrt": _rsqrt,
    "relu6": _relu6, "clip_by_value": _clip, "gelu": _gelu, "elu": _elu, "selu": _elu, "pad": _pad,
    "gather": _gather, "log_softmax": _softmax("LogSoftmax"),
    "add": _arithmetic("Add"), "subtract": _arithmetic("Sub"), "multiply": _arithmetic("Mul"),
    "divide": _arithmetic("Div"),
    "maximum": _simple("Max"), "minimum": _simple("Min"), "pow": _simple("Pow"), "add_n": _simple("Sum"),
    "scalar_add": _scalar("Add"), "scalar_mul": _scalar("Mul"), "scalar_div": _scalar("Div"),
    "scalar_pow": _scalar("Pow"), "scalar_rsub": _scalar("Sub", scalar_first=True),
    "scalar_rdiv": _scalar("Div", scalar_first=True),
    "matmul": _matmul, "bias_add": _bias_add, "reshape": _reshape, "transpose": _transpose, "concat": _concat,
    "softmax": _softmax("Softmax"), "cast": _cast, "batch_norm": _batch_norm,
    "conv2d": _conv2d, "conv2d_bias": _conv2d, "deconv2d": _deconv2d, "matmul_bias": _matmul,
    "max_pool2d": _pool("MaxPool"), "avg_pool2d": _pool("AveragePool"),
    "reduce_sum": _reduce("ReduceSum"), "reduce_mean": _reduce("ReduceMean"), "reduce_max": _reduce("ReduceMax"),
    "reduce_min": _reduce("ReduceMin"), "reduce_prod": _reduce("ReduceProd"),
    **onnx_elementwise.CONVERTERS, **onnx_array.CONVERTERS, **onnx_quantization.CONVERTERS,
    **onnx_losses.CONVERTERS, **onnx_nn.CONVERTERS,
}
"""op type -> converter; ``flow.onnx.export`` refuses a job holding any other op, naming it."""
