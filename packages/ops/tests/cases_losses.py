"""Op cases of the legacy losses and reductions beyond sum/mean/max/min (records in
``flowjob_ops/records/cross_entropy.py`` and ``records/reduce.py``). op_cases.py appends ``CASES``.

References are plain numpy written from the definitions (a log of a sum of exponentials in float64,
products of the other elements by explicit deletion), not from the kernels' formulas.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _shape(draw: Draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, max_dims, max_side)))


def _array(draw: Draw, shape: tuple[int, ...], low: float = -3.0, high: float = 3.0) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(low, high, allow_subnormal=False)))


def _axes(draw: Draw, rank: int) -> Any:
    kind = draw(st.sampled_from(["none", "int", "list"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    return sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))


def _np_axes(axis: Any, rank: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(rank))
    return tuple(sorted(a % rank for a in np.atleast_1d(axis)))


def _finish(value: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return value if keepdims else value.reshape([d for i, d in enumerate(value.shape) if i not in axes])


# reductions ------------------------------------------------------------------------------------
def reduce_case(low: float = -3.0, high: float = 3.0) -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        return [_array(draw, shape, low, high)], {"axis": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}

    return make


def prod_case(draw: Draw) -> Case:
    """Elements away from 0 for the gradient check (finite differences across 0 are fine, but the
    product of many values near 0 makes relative errors large); the zeros live in prod_grad_case."""
    shape = _shape(draw)
    x = draw(fst.array_away_from(shape, (0.0,), 0.3, -2.0, 2.0))
    return [x], {"axis": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}


def prod_ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    return np.prod(x, axis=_np_axes(axis, x.ndim), keepdims=keepdims)


def prod_grad_case(draw: Draw) -> Case:
    """x with 0, 1 or several exact zeros per slice, and any dy."""
    (x,), attrs = prod_case(draw)
    zeros = draw(fst.arrays(x.shape, st.sampled_from([False, False, True]), dtype=bool))
    x = np.where(zeros, 0.0, x)
    y = prod_ref(x, **attrs)
    return [x, _array(draw, y.shape)], attrs


def prod_grad_ref(x: np.ndarray, dy: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """dy times the product of the slice with this one element left out, element by element."""
    axes = _np_axes(axis, x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    dyk = dy.reshape(kept)
    out = np.empty_like(x)
    for index in np.ndindex(*x.shape):
        picks = tuple(slice(None) if i in axes else index[i] for i in range(x.ndim))
        block = x[picks].copy()  # the slice through ``index`` (its reduced axes)
        own = tuple(index[i] for i in range(x.ndim) if i in axes)
        block[own] = 1.0
        out[index] = dyk[tuple(0 if i in axes else index[i] for i in range(x.ndim))] * np.prod(block)
    return out


def logical_case(draw: Draw) -> Case:
    shape = _shape(draw)
    dtype = draw(st.sampled_from([np.float64, np.int32, np.int8]))
    x = np.asarray(draw(fst.arrays(shape, st.sampled_from([0, 0, 1, -2]), dtype=np.int64))).astype(dtype)
    return [x], {"axis": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}


def logical_ref(fn: Any) -> Any:
    return lambda x, axis, keepdims: fn(x != 0, axis=_np_axes(axis, x.ndim), keepdims=keepdims).astype(np.int8)


def logsumexp_case(draw: Draw) -> Case:
    shape = _shape(draw)
    scale = draw(st.sampled_from([1.0, 1.0, 300.0]))  # 300: exp overflows float64 unless shifted
    return [_array(draw, shape) * scale], {"axis": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}


def logsumexp_ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    axes = _np_axes(axis, x.ndim)
    peak = np.max(x, axis=axes, keepdims=True)
    value = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return _finish(value, axes, keepdims)


# l2_normalize -------------------------------------------------------------------------------------
def l2_case(draw: Draw) -> Case:
    """Elements away from 0 (a slice's norm >= 0.2, so finite differences stay well conditioned), and
    maybe one slice of zeros with epsilon 1e-2: the clamped branch, whose gradient is dy / sqrt(epsilon)
    (with epsilon 1e-12 a finite-difference step of 1e-6 would cross the kink at sum == epsilon)."""
    shape = _shape(draw)
    x = draw(fst.array_away_from(shape, (0.0,), 0.2, -3.0, 3.0))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    epsilon = draw(st.sampled_from([1e-12, 1e-2]))
    if epsilon == 1e-2 and draw(st.booleans()):
        x[tuple(slice(None) if i == axis % len(shape) else 0 for i in range(len(shape)))] = 0.0
    return [x], {"axis": axis, "epsilon": epsilon}


def l2_ref(x: np.ndarray, axis: int, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    sums = np.sum(x * x, axis=axis, keepdims=True)
    return x / np.sqrt(np.maximum(sums, epsilon)), sums


def l2_grad_case(draw: Draw) -> Case:
    (x,), attrs = l2_case(draw)
    y, sums = l2_ref(x, **attrs)
    return [_array(draw, x.shape), y, sums], attrs


def l2_grad_ref(dy: np.ndarray, y: np.ndarray, sums: np.ndarray, axis: int, epsilon: float) -> np.ndarray:
    """Jacobian-vector product of x / sqrt(max(s, eps)) written from the definition, slice by slice."""
    norm = np.sqrt(np.maximum(sums, epsilon))
    x = y * norm
    moved_x, moved_dy = np.moveaxis(x, axis, -1), np.moveaxis(dy, axis, -1)
    moved_n, moved_s = np.moveaxis(norm, axis, -1), np.moveaxis(sums, axis, -1)
    out = np.empty_like(moved_x)
    for index in np.ndindex(*moved_x.shape[:-1]):
        v, g, n = moved_x[index], moved_dy[index], moved_n[index][0]
        jac = np.eye(v.size) / n
        if moved_s[index][0] >= epsilon:  # d(1/n)/dx = -x / n^3
            jac -= np.outer(v, v) / n ** 3
        out[index] = jac.T @ g
    return np.moveaxis(out, -1, axis)


# sparse_cross_entropy ---------------------------------------------------------------------------
def sparse_ce_case(draw: Draw) -> Case:
    lead = _shape(draw, 1, 2, 3)
    classes = draw(st.integers(1, 5))
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    labels = np.asarray(draw(fst.arrays(lead, st.integers(0, classes - 1), dtype=dtype)))
    prediction = draw(fst.arrays(lead + (classes,), st.floats(0.05, 1.0)))
    return [labels, prediction], {}


def sparse_ce_ref(labels: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    picked = np.take_along_axis(prediction, labels[..., None].astype(np.int64), -1)[..., 0]
    return -np.log(np.maximum(picked, 1e-20))


def sparse_ce_grad_case(draw: Draw) -> Case:
    (labels, prediction), _ = sparse_ce_case(draw)
    if draw(st.booleans()):  # a zero probability: clamped at 1e-20, as legacy
        prediction = prediction.copy()
        prediction.reshape(-1, prediction.shape[-1])[0, labels.reshape(-1)[0]] = 0.0
    return [labels, prediction, _array(draw, labels.shape)], {}


def sparse_ce_grad_ref(labels: np.ndarray, prediction: np.ndarray, dy: np.ndarray) -> np.ndarray:
    onehot = np.eye(prediction.shape[-1])[labels]
    return -onehot * (dy / np.maximum(np.sum(onehot * prediction, axis=-1), 1e-20))[..., None]


CASES = [
    OpCase("reduce_prod", prod_case, reference=prod_ref),
    OpCase("reduce_prod_grad", prod_grad_case, reference=prod_grad_ref, wrt=()),
    OpCase("reduce_any", logical_case, reference=logical_ref(np.any), wrt=()),
    OpCase("reduce_all", logical_case, reference=logical_ref(np.all), wrt=()),
    OpCase("reduce_logsumexp", logsumexp_case, reference=logsumexp_ref),
    OpCase("l2_normalize", l2_case, reference=l2_ref),
    OpCase("l2_normalize_grad", l2_grad_case, reference=l2_grad_ref, wrt=()),
    OpCase("sparse_cross_entropy", sparse_ce_case, reference=sparse_ce_ref, wrt=(1,)),
    OpCase("sparse_cross_entropy_grad", sparse_ce_grad_case, reference=sparse_ce_grad_ref, wrt=()),
]
