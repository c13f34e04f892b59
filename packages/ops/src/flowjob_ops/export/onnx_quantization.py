"""Quantization ops as ONNX, as legacy's exporter wrote them: ``fake_quantization`` becomes a
``QuantizeLinear``/``DequantizeLinear`` pair with its scale and zero point (8-bit symmetric Google formula on
float32; per channel from opset 13, where the pair takes an axis), and the observers compute that scale and
zero point in the graph with the records' formulas (``records.quantization.scale_and_zero_point``), so a model
quantizes whatever it is fed. Where the pair would differ from the record, the record's arithmetic is written
instead: other bit widths, the Cambricon formula, and the affine scheme (whose zero point the record keeps
even outside [0, 255], where the pair's uint8 one would saturate).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_elementwise import equal, round_half_even
from flowjob_ops.export.onnx_emitter import Emitter

Converter = Callable[[Emitter, Node], None]
INT8 = 3  # onnx.TensorProto


def _attrs(node: Node) -> tuple[int, str, str]:
    return (int(node.attrs.get("quantization_bit", 8)), node.attrs.get("quantization_scheme", "symmetric"),
            node.attrs.get("quantization_formula", "google"))


def _floor_log2(e: Emitter, top: str, dtype: np.dtype, stem: str) -> str:
    """floor(log2(top)), exact at powers of two: log / ln 2 is corrected by one where 2^f misses top."""
    c = lambda v: e.constant(v, f"{stem}/const", dtype)  # noqa: E731 - a constant of top's dtype
    guess = e.add("Floor", [e.add("Mul", [e.add("Log", [top], stem=stem), c(1.0 / np.log(2.0))], stem=stem)],
                  stem=stem)
    two = c(2.0)
    up = e.add("Add", [guess, c(1.0)], stem=stem)
    guess = e.add("Where", [e.add("Not", [e.add("Greater", [e.add("Pow", [two, up], stem=stem), top], stem=stem)],
                                  stem=stem), up, guess], stem=stem)
    down = e.add("Sub", [guess, c(1.0)], stem=stem)
    return e.add("Where", [e.add("Greater", [e.add("Pow", [two, guess], stem=stem), top], stem=stem), down, guess],
                 stem=stem)


def _scale_and_zero_point(e: Emitter, node: Node, low: str, high: str) -> None:
    """The records' ``scale_and_zero_point`` on per-channel ranges ``low``/``high`` (shape (C,)), into the
    node's two outputs."""
    bit, scheme, formula = _attrs(node)
    stem = node.name
    scale_out, zero_out = node.outputs
    dtype = e.dtype(scale_out)
    c = lambda v: e.constant(v, f"{stem}/const", dtype)  # noqa: E731 - a constant of the outputs' dtype
    zeros = e.constant(np.zeros(e.shape(zero_out), dtype), f"{stem}/zeros")
    if formula == "cambricon" or scheme == "symmetric":
        top = e.add("Max", [e.add("Abs", [high], stem=stem), e.add("Abs", [low], stem=stem)], stem=stem)
        if formula == "cambricon":
            e.add("Sub", [_floor_log2(e, top, dtype, stem), c(float(bit - 2))], [scale_out], stem)
        else:
            scale = e.add("Div", [top, c(2.0 ** (bit - 1) - 1)], stem=stem)
            e.add("Where", [equal(e, scale, c(0.0), stem, dtype), c(1.0), scale], [scale_out], stem)
        e.add("Identity", [zeros], [zero_out], stem)
        return
    flat = equal(e, high, low, stem, dtype)
    low = e.add("Where", [flat, e.add("Min", [low, c(0.0)], stem=stem), low], stem=stem)
    high = e.add("Where", [flat, e.add("Max", [high, c(0.0)], stem=stem), high], stem=stem)
    scale = e.add("Div", [e.add("Sub", [high, low], stem=stem), c(2.0 ** bit - 1)], stem=stem)
    scale = e.add("Where", [equal(e, scale, c(0.0), stem, dtype), c(1.0), scale], [scale_out], stem)
    ratio = e.add("Div", [low, scale], stem=stem)  # -round(low / scale), halves away from zero
    rounded = e.add("Mul", [e.add("Sign", [ratio], stem=stem),
                            e.add("Floor", [e.add("Add", [e.add("Abs", [ratio], stem=stem), c(0.5)], stem=stem)],
                                  stem=stem)], stem=stem)
    e.add("Neg", [rounded], [zero_out], stem)


def _min_max_observer(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    channels = e.shape(node.outputs[0])[0]
    rows = e.add("Reshape", [x, e.constant([channels, -1], f"{node.name}/rows", np.int64)], stem=node.name)
    low = e.reduce("ReduceMin", rows, [1], False, None, node.name)
    high = e.reduce("ReduceMax", rows, [1], False, None, node.name)
    _scale_and_zero_point(e, node, low, high)


def _moving_average_min_max_observer(e: Emitter, node: Node) -> None:
    """Inference: the scale and zero point of the kept range (moving_max, moving_min), as legacy exported."""
    if node.attrs.get("training"):
        raise e.refuse("training=True updates the moving range in place at each step, which an ONNX model "
                       "does not; export the job with training=False")
    _x, _step, moving_max, moving_min = node.inputs
    _scale_and_zero_point(e, node, moving_min, moving_max)


def _levels(e: Emitter, ratio: str, low: float, high: float, dtype: np.dtype, stem: str) -> str:
    """The quantization levels: ``ratio`` rounded half to even, clipped to [low, high]."""
    return e.clip(round_half_even(e, ratio, stem, dtype), low, high, None, stem, dtype)


def _fake_quantization(e: Emitter, node: Node) -> None:
    x, scale, zero = node.inputs
    bit, scheme, formula = _attrs(node)
    stem = node.name
    rank = len(e.shape(x))
    per_channel = int(np.prod(e.shape(scale))) > 1
    pair = formula == "google" and scheme == "symmetric" and bit == 8 and e.dtype(x) == np.float32
    if pair and (not per_channel or e.opset >= 13):
        point = e.add("Cast", [zero], stem=stem, to=INT8)  # 0: the symmetric scheme's
        if per_channel:
            axis = {"axis": 0}
        else:  # one scale: a scalar, as QuantizeLinear-10 takes
            empty = e.constant(np.zeros((0,), np.int64), f"{stem}/scalar")
            scale = e.add("Reshape", [scale, empty], stem=stem)
            point = e.add("Reshape", [point, empty], stem=stem)
            axis = {}
        quantized = e.add("QuantizeLinear", [x, scale, point], stem=stem, **axis)
        e.add("DequantizeLinear", [quantized, scale, point], list(node.outputs), stem, **axis)
        return
    shape = [e.shape(x)[0]] + [1] * (rank - 1) if per_channel else [1] * rank
    target = e.constant(shape, f"{stem}/shape", np.int64)
    scale = e.add("Reshape", [scale, target], stem=stem)
    c = lambda v: e.constant(v, f"{stem}/const", e.dtype(x))  # noqa: E731
    top = 2.0 ** (bit - 1) - 1
    if formula == "cambricon":
        shift = e.add("Cast", [e.add("Cast", [scale], stem=stem, to=6)], stem=stem,  # through int32, as the record
                      to=e.tensor_type(e.dtype(x)))
        step = e.add("Pow", [c(2.0), shift], stem=stem)
        levels = _levels(e, e.add("Div", [x, step], stem=stem), -top - 1, top, e.dtype(x), stem)
        e.add("Mul", [levels, step], list(node.outputs), stem)
        return
    if scheme == "symmetric":
        levels = _levels(e, e.add("Div", [x, scale], stem=stem), -top - 1, top, e.dtype(x), stem)
        e.add("Mul", [levels, scale], list(node.outputs), stem)
        return
    zero = e.add("Reshape", [zero, target], stem=stem)
    zero = e.add("Mul", [e.add("Sign", [zero], stem=stem),
                         e.add("Floor", [e.add("Add", [e.add("Abs", [zero], stem=stem), c(0.5)], stem=stem)],
                               stem=stem)], stem=stem)
    shifted = e.add("Add", [e.add("Div", [x, scale], stem=stem), zero], stem=stem)
    levels = _levels(e, shifted, 0.0, 2.0 ** bit - 1, e.dtype(x), stem)
    e.add("Mul", [e.add("Sub", [levels, zero], stem=stem), scale], list(node.outputs), stem)


CONVERTERS: dict[str, Converter] = {
    "fake_quantization": _fake_quantization, "min_max_observer": _min_max_observer,
    "moving_average_min_max_observer": _moving_average_min_max_observer,
}
"""op type -> converter, for the quantization ops."""

__all__ = ["CONVERTERS"]
