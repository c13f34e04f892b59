"""``flow.math`` names of legacy v0.4 left over: clip_by_value (also top-level), two_stage_reduce_max/_min,
gelu_grad, sigmoid_grad, fused_scale_tril_softmax_dropout (also flow.nn) and reduced_shape_elem_cnt.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.records.common import build_error
from flowjob_ops.records.shape import counted_axes
from flowjob_ops.extra_nn import fused_scale_tril_softmax_dropout

__all__ = ["clip_by_value", "fused_scale_tril_softmax_dropout", "gelu_grad", "reduced_shape_elem_cnt",
           "sigmoid_grad", "two_stage_reduce_max", "two_stage_reduce_min"]


def clip_by_value(values: Blob, min_value: float | None = None, max_value: float | None = None,
                  name: str | None = None) -> Blob:
    """``flow.math.clip_by_value``: the top-level ``flow.clip_by_value`` (legacy exported it under both names).

    Args:
        values: a blob.
        min_value: the lower bound (None: none; at least one bound is needed).
        max_value: the upper bound (None: none).
        name: the op name; default ``ClipByValue_<n>``.
    """
    # imported here: flowjob_ops.array_ops imports flowjob_ops.math, which imports this module
    from flowjob_ops import array_ops

    return array_ops.clip_by_value(values, min_value, max_value, name)


def _two_stage(op: str, x: Blob, axis: int | Sequence[int] | None, keepdims: bool, name: str | None) -> Blob:
    from flowjob_ops import math

    # one process holds every split: the device stage and the global stage are the whole reduction, and
    # legacy's gradient (dy shared evenly among the tied extrema) is reduce_max/min's own
    reduce = math.reduce_max if op == "max" else math.reduce_min
    return reduce(x, axis=axis, keepdims=keepdims, name=name)


def two_stage_reduce_max(x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                         name: str | None = None) -> Blob:
    """Maximum over ``axis`` (default: all), reduced per device then globally in legacy; one stage here.

    Args:
        x: a blob.
        axis: None, an int or a list of ints.
        keepdims: keep reduced axes as 1.
        name: the op name; default ``ReduceMax_<n>``.
    """
    return _two_stage("max", x, axis, keepdims, name)


def two_stage_reduce_min(x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                         name: str | None = None) -> Blob:
    """Minimum over ``axis`` (default: all); see ``two_stage_reduce_max``.

    Args:
        x: a blob.
        axis: None, an int or a list of ints.
        keepdims: keep reduced axes as 1.
        name: the op name; default ``ReduceMin_<n>``.
    """
    return _two_stage("min", x, axis, keepdims, name)


def gelu_grad(x: Blob, dy: Blob, name: str | None = None) -> Blob:
    """dy * gelu'(x) = dy * (Phi(x) + x phi(x)).

    Args:
        x: gelu's input.
        dy: the gradient of gelu's output, shaped like x.
        name: the op name; default ``GeluGrad_<n>``.
    """
    return apply("gelu_grad", [x, dy], name=name)


def sigmoid_grad(y: Blob, dy: Blob, name: str | None = None) -> Blob:
    """dy * y * (1 - y), from sigmoid's output y.

    Args:
        y: sigmoid's output.
        dy: its gradient, shaped like y.
        name: the op name; default ``SigmoidGrad_<n>``.
    """
    return apply("sigmoid_grad", [y, dy], name=name)


def reduced_shape_elem_cnt(input_blob: Blob, axis: Sequence[int] | None = None, dtype: Any = None,
                           name: str | None = None) -> Blob:
    """The product of ``input_blob``'s extents along ``axis`` (default: all), as a (1,) blob.

    Args:
        input_blob: a blob (only its shape is read).
        axis: None or a list/tuple of axes.
        dtype: the result's dtype (default int32, legacy's).
        name: the op name; default ``ShapeElemCnt_<n>``.
    """
    if not isinstance(input_blob, Blob):
        raise TypeError(f"flow.math.reduced_shape_elem_cnt: input_blob must be a blob, got {type(input_blob).__name__}")
    try:
        counted_axes(axis, len(input_blob.shape))
    except Exception as exc:
        raise build_error("flow.math.reduced_shape_elem_cnt", str(exc)) from None
    axis = None if axis is None else list(axis)
    return apply("shape_elem_cnt", [input_blob], {"axis": axis, "dtype": dtype}, name=name)
