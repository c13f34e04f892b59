"""Normalization, padding, resampling and the fused scale ops as ONNX: ``moments``, ``pad2d`` (reflect /
edge padding), ``upsample`` (the record's own interpolation matrices, so legacy's source indices are kept
exactly at every opset), ``fused_scale_tril``, ``fused_cast_scale`` and the 3-D convolution and poolings."""
from __future__ import annotations

from typing import Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_emitter import Emitter
from flowjob_ops.kernels import window as windows
from flowjob_ops.records.upsample import interpolation_matrix

Converter = Callable[[Emitter, Node], None]


def _moments(e: Emitter, node: Node) -> None:
    """(mean, biased variance) over the axes: the variance is the mean of the squared deviations."""
    (x,) = node.inputs
    mean_out, variance_out = node.outputs
    rank = len(e.shape(x))
    axes = sorted({int(a) % rank for a in np.atleast_1d(node.attrs["axes"])})
    kept = e.reduce("ReduceMean", x, axes, True, None, node.name)
    deviation = e.add("Sub", [x, kept], stem=node.name)
    variance = e.reduce("ReduceMean", e.add("Mul", [deviation, deviation], stem=node.name), axes, True, None,
                        node.name)
    # reshaped to the record's shapes: the reduced axes dropped, or (1,) where every axis goes (never 0-d)
    for value, out in ((kept, mean_out), (variance, variance_out)):
        e.add("Reshape", [value, e.constant(list(e.shape(out)), f"{node.name}/shape", np.int64)], [out], node.name)


def _pad2d(e: Emitter, node: Node) -> None:
    """NCHW padding of H and W by (left, right, top, bottom): ``reflect`` mirrors, ``replicate`` is ONNX's
    ``edge``."""
    (x,) = node.inputs
    left, right, top, bottom = (int(v) for v in node.attrs["padding"])
    mode = {"reflect": "reflect", "replicate": "edge"}[node.attrs["mode"]]
    e.pad(x, [0, 0, top, left, 0, 0, bottom, right], 0.0, list(node.outputs), node.name, mode=mode)


def _upsample(e: Emitter, node: Node) -> None:
    """y = A_h @ x @ A_w^T with the record's interpolation matrices (nearest: one 1 per row)."""
    (x,) = node.inputs
    (out,) = node.outputs
    _, _, h, w = e.shape(x)
    _, _, oh, ow = e.shape(out)
    align = bool(node.attrs.get("align_corners", False))
    interpolation = node.attrs.get("interpolation", "nearest")
    rows = interpolation_matrix(h, oh, float(node.attrs["height_scale"]), align, interpolation)
    cols = interpolation_matrix(w, ow, float(node.attrs["width_scale"]), align, interpolation)
    dtype = e.dtype(x)
    tall = e.add("MatMul", [e.constant(np.asarray(rows, dtype), f"{node.name}/rows"), x], stem=node.name)
    e.add("MatMul", [tall, e.constant(np.asarray(cols, dtype).T, f"{node.name}/cols")], [out], node.name)


def _fused_scale_tril(e: Emitter, node: Node) -> None:
    """scale * x in the lower triangle (j <= i + diagonal) of the last two axes, fill_value above."""
    (x,) = node.inputs
    rows, cols = e.shape(x)[-2:]
    dtype = e.dtype(x)
    mask = np.tril(np.ones((rows, cols), bool), int(node.attrs.get("diagonal", 0)))
    scaled = e.add("Mul", [x, e.constant(node.attrs.get("scale", 1), f"{node.name}/scale", dtype)], stem=node.name)
    fill = e.constant(node.attrs.get("fill_value", 0), f"{node.name}/fill", dtype)
    e.add("Where", [e.constant(mask, f"{node.name}/mask"), scaled, fill], list(node.outputs), node.name)


def _fused_cast_scale(e: Emitter, node: Node) -> None:
    """x cast to scale_by_tensor's dtype, times scale_by_tensor[0] * scale."""
    x, by = node.inputs
    dtype = e.dtype(by)
    cast = x if e.dtype(x) == dtype else e.add("Cast", [x], stem=node.name, to=e.tensor_type(dtype))
    factor = e.add("Mul", [by, e.constant(float(node.attrs.get("scale", 1.0)), f"{node.name}/scale", dtype)],
                   stem=node.name)
    e.add("Mul", [cast, factor], list(node.outputs), node.name)


def _windowed(e: Emitter, node: Node, x: str, ksize: object, dilations: object) -> tuple[bool, dict]:
    """(channels last?, the ONNX window attributes) of a 3-D convolution or pooling node."""
    rank = len(e.shape(x)) - 2
    fmt = windows.check_format(node.attrs.get("data_format", windows.FORMATS[rank][0]), rank)
    axes = windows.spatial_axes(fmt)
    window = windows.Window.create([e.shape(x)[a] for a in axes], ksize, node.attrs.get("strides", 1), dilations,
                                   node.attrs.get("padding", "VALID"), fmt)
    pads = [b for b, _ in window.pads] + [a for _, a in window.pads]
    return fmt[1] != "C", {"kernel_shape": list(window.ksize), "strides": list(window.strides), "pads": pads}


def _channels_first(e: Emitter, node: Node, last: bool, run: Callable[[str], str]) -> None:
    """``run`` on the node's channels-first input; channels-last values are transposed in and out."""
    (out,) = node.outputs
    rank = len(e.shape(node.inputs[0]))
    if not last:
        e.add("Identity", [run(node.inputs[0])], [out], node.name)
        return
    to_first = [0, rank - 1, *range(1, rank - 1)]
    moved = e.add("Transpose", [node.inputs[0]], stem=node.name, perm=to_first)
    e.add("Transpose", [run(moved)], [out], node.name, perm=[0, *range(2, rank), 1])


def _conv3d(e: Emitter, node: Node) -> None:
    x, w = node.inputs
    rank = len(e.shape(x))
    last = str(node.attrs.get("data_format", "NCDHW")).upper().endswith("C")
    kernel = e.shape(w)[1:-1] if last else e.shape(w)[2:]
    dilations = node.attrs.get("dilations")
    _, attrs = _windowed(e, node, x, kernel, 1 if dilations is None else dilations)
    attrs.update(dilations=list(windows.spatial_ints(1 if dilations is None else dilations, rank - 2, "dilations")),
                 group=int(node.attrs.get("groups", 1)))
    weights = w if not last else e.add("Transpose", [w], stem=node.name, perm=[0, rank - 1, *range(1, rank - 1)])
    _channels_first(e, node, last, lambda first: e.add("Conv", [first, weights], stem=node.name, **attrs))


def _pool3d(op_type: str) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        last, attrs = _windowed(e, node, node.inputs[0], node.attrs["ksize"], 1)
        if op_type == "AveragePool":
            attrs["count_include_pad"] = 0  # the mean over the window's cells inside the input, as legacy
        _channels_first(e, node, last, lambda first: e.add(op_type, [first], stem=node.name, **attrs))

    return convert


def _self_attention(e: Emitter, node: Node) -> None:
    """BERT's fused attention head split: hidden (seq, batch, heads * 3 * size), each head's slice q, k, v;
    out_0 = alpha * q @ k^T and out_1 = v, both (batch, heads, seq, ...)."""
    (hidden,) = node.inputs
    qmk_out, v_out = node.outputs
    seq, batch, width = e.shape(hidden)
    size = int(node.attrs["head_size"])
    heads = width // (3 * size)
    stem = node.name
    per_head = e.add("Reshape", [hidden, e.constant([seq, batch, heads, 3, size], f"{stem}/heads", np.int64)],
                     stem=stem)
    parts = [e.fresh(f"{stem}/{name}") for name in ("q", "k", "v")]
    e.split(per_head, 3, [1, 1, 1], parts, stem)
    q, k, v = (e.add("Transpose", [e.squeeze(part, [3], None, stem)], stem=stem, perm=[1, 2, 0, 3])
               for part in parts)
    product = e.add("MatMul", [q, e.add("Transpose", [k], stem=stem, perm=[0, 1, 3, 2])], stem=stem)
    e.add("Mul", [product, e.constant(float(node.attrs["alpha"]), f"{stem}/alpha", e.dtype(hidden))], [qmk_out],
          stem)
    e.add("Identity", [v], [v_out], stem)


CONVERTERS: dict[str, Converter] = {
    "moments": _moments, "pad2d": _pad2d, "upsample": _upsample, "fused_scale_tril": _fused_scale_tril,
    "fused_cast_scale": _fused_cast_scale, "conv3d": _conv3d, "max_pool3d": _pool3d("MaxPool"),
    "avg_pool3d": _pool3d("AveragePool"),
    "fused_self_attention_query_mul_key_and_value": _self_attention,
}
"""op type -> converter, for normalization, padding, resampling and the fused scale ops."""

__all__ = ["CONVERTERS"]
