"""Normalization, padding, resampling and the fused scale ops as ONNX: ``moments``, ``pad2d`` (reflect /
edge padding), ``upsample`` (the record's own interpolation matrices, so legacy's source indices are kept
exactly at every opset), ``fused_scale_tril`` and ``fused_cast_scale``."""
from __future__ import annotations

from typing import Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_emitter import Emitter
from flowjob_ops.records.upsample import interpolation_matrix

Converter = Callable[[Emitter, Node], None]


def _moments(e: Emitter, node: Node) -> None:
    """(mean, biased variance) over the axes: the variance is the mean of the squared deviations."""
    (x,) = node.inputs
    mean_out, variance_out = node.outputs
    rank = len(e.shape(x))
    axes = sorted({int(a) % rank for a in np.atleast_1d(node.attrs["axes"])})
    keep = bool(node.attrs.get("keepdims", False))
    kept = e.reduce("ReduceMean", x, axes, True, None, node.name)
    deviation = e.add("Sub", [x, kept], stem=node.name)
    square = e.add("Mul", [deviation, deviation], stem=node.name)
    if keep:
        e.add("Identity", [kept], [mean_out], node.name)
        e.reduce("ReduceMean", square, axes, True, [variance_out], node.name)
        return
    e.squeeze(kept, axes, [mean_out], node.name)
    e.reduce("ReduceMean", square, axes, False, [variance_out], node.name)


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


CONVERTERS: dict[str, Converter] = {
    "moments": _moments, "pad2d": _pad2d, "upsample": _upsample, "fused_scale_tril": _fused_scale_tril,
    "fused_cast_scale": _fused_cast_scale,
}
"""op type -> converter, for normalization, padding, resampling and the fused scale ops."""

__all__ = ["CONVERTERS"]
