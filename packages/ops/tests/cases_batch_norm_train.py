"""Op cases for the fused train-mode batch normalization (``batch_norm_train``) and its gradient op,
with plain-numpy references in float64.

x gets a fixed alternating ramp over the reduced positions on top of its draw, so every channel's
batch variance stays well away from zero and the central-difference check is well conditioned.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def _reduce_axes(rank: int, axis: int) -> tuple[int, ...]:
    return tuple(i for i in range(rank) if i != axis % rank)


def batch_norm_train_case(draw: Draw) -> Case:
    shape = (draw(st.integers(1, 3)),) + base._shape(draw, 1, 2, max_side=3)
    rank = len(shape)
    axis = draw(st.integers(-rank, rank - 1))
    other = (axis + 1) % rank  # at least two values per channel: a batch variance to normalize by
    shape = tuple(max(d, 2) if i == other else d for i, d in enumerate(shape))
    x = base._array(draw, shape, -1.0, 1.0)
    ramp = np.where(np.indices(shape).sum(axis=0) % 2 == 0, 2.0, -2.0)
    x = (x + ramp * (1.0 + np.arange(shape[axis % rank]).reshape(
        [-1 if i == axis % rank else 1 for i in range(rank)]))).astype(x.dtype)
    with_scale, with_offset = draw(st.booleans()), draw(st.booleans())
    channels = (shape[axis % rank],)
    params = [base._array(draw, channels) for flag in (with_scale, with_offset) if flag]
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    return [x, *params], {"axis": axis, "epsilon": eps, "with_scale": with_scale, "with_offset": with_offset}


def _broadcast(p: np.ndarray, rank: int, axis: int) -> np.ndarray:
    return p.reshape([-1 if i == axis % rank else 1 for i in range(rank)])


def batch_norm_train_ref(x: np.ndarray, *params: np.ndarray, axis: int, epsilon: float, with_scale: bool,
                         with_offset: bool, activation: str | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x64, rank = x.astype(np.float64), x.ndim
    axes = _reduce_axes(rank, axis)
    mean, variance = x64.mean(axis=axes), x64.var(axis=axes)
    y = (x64 - _broadcast(mean, rank, axis)) / np.sqrt(_broadcast(variance, rank, axis) + epsilon)
    if with_scale:
        y = y * _broadcast(params[0], rank, axis)
    if with_offset:
        y = y + _broadcast(params[-1], rank, axis)
    if activation == "relu":
        y = np.maximum(y, 0)
    return y, mean, variance


def batch_norm_train_relu_case(draw: Draw) -> Case:
    inputs, attrs = batch_norm_train_case(draw)
    return inputs, {**attrs, "activation": "relu"}


def batch_norm_train_grad_case(draw: Draw) -> Case:
    inputs, attrs = batch_norm_train_case(draw)
    x = inputs[0]
    _, mean, variance = batch_norm_train_ref(*inputs, **attrs)
    saved = [x, mean.astype(x.dtype), variance.astype(x.dtype)] + (inputs[1:2] if attrs["with_scale"] else [])
    return [*saved, base._array(draw, x.shape)], attrs


def batch_norm_train_relu_grad_case(draw: Draw) -> Case:
    inputs, attrs = batch_norm_train_relu_case(draw)
    x = inputs[0]
    y, mean, variance = batch_norm_train_ref(*inputs, **attrs)
    saved = [x, mean.astype(x.dtype), variance.astype(x.dtype)] + (inputs[1:2] if attrs["with_scale"] else [])
    return [*saved, y.astype(x.dtype), base._array(draw, x.shape)], attrs


def batch_norm_train_grad_ref(x: np.ndarray, mean: np.ndarray, variance: np.ndarray, *rest: np.ndarray, axis: int,
                              epsilon: float, with_scale: bool, with_offset: bool, activation: str | None = None
                              ) -> tuple[np.ndarray, ...]:
    rank = x.ndim
    axes = _reduce_axes(rank, axis)
    dy = rest[-1].astype(np.float64)
    if activation == "relu":  # rest[-2] is the ReLU's output
        dy = np.where(rest[-2] > 0, dy, 0.0)
    sigma = np.sqrt(_broadcast(variance.astype(np.float64), rank, axis) + epsilon)
    xhat = (x - _broadcast(mean.astype(np.float64), rank, axis)) / sigma
    gain = (_broadcast(rest[0].astype(np.float64), rank, axis) if with_scale else 1.0) / sigma
    dx = gain * (dy - dy.mean(axis=axes, keepdims=True) - xhat * (dy * xhat).mean(axis=axes, keepdims=True))
    grads = [dx]
    if with_scale:
        grads.append((dy * xhat).sum(axis=axes))
    if with_offset:
        grads.append(dy.sum(axis=axes))
    return tuple(grads)


CASES = [
    OpCase("batch_norm_train", batch_norm_train_case, reference=batch_norm_train_ref),
    OpCase("batch_norm_train_grad", batch_norm_train_grad_case, wrt=(), reference=batch_norm_train_grad_ref),
    # the fusion pass's ReLU variants; the gradient through the ReLU's kink is checked against the unfused
    # graph in tests/test_batch_norm_train_fused.py
    OpCase("batch_norm_train", batch_norm_train_relu_case, wrt=(), reference=batch_norm_train_ref,
           name="batch_norm_train_relu"),
    OpCase("batch_norm_train_grad", batch_norm_train_relu_grad_case, wrt=(), reference=batch_norm_train_grad_ref,
           name="batch_norm_train_relu_grad"),
]
