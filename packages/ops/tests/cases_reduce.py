"""Op cases of the reductions beyond op_cases.py's table (records in ``flowjob_ops/records/reduce.py``):
reduce_prod, reduce_any, reduce_all, reduce_logsumexp and the counts of non-finite elements. op_cases.py
appends ``CASES``.

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


def legacy_reduced(value: Any) -> np.ndarray:
    """A reduction's numpy result in legacy's shape: a reduction of every axis is (1,), never 0-d."""
    return np.reshape(value, np.shape(value) or (1,))


def _finish(value: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return value if keepdims else value.reshape([d for i, d in enumerate(value.shape) if i not in axes] or [1])


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
    return legacy_reduced(np.prod(x, axis=_np_axes(axis, x.ndim), keepdims=keepdims))


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
    return lambda x, axis, keepdims: legacy_reduced(fn(x != 0, axis=_np_axes(axis, x.ndim), keepdims=keepdims)
                                                    ).astype(np.int8)


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


# sparse_cross_entropy ---------------------------------------------------------------------------


def _with_specials(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    x = _array(draw, shape)
    flat = x.reshape(-1)
    for i in range(flat.size):
        flat[i] = draw(st.sampled_from([flat[i], flat[i], np.inf, -np.inf, np.nan]))
    return x


def count_case(draw: Draw) -> Case:
    return [_with_specials(draw, _shape(draw, 0, 3))], {}


def multi_count_case(draw: Draw) -> Case:
    return [_with_specials(draw, _shape(draw, 0, 3)) for _ in range(draw(st.integers(1, 3)))], {}


def count_ref(*blobs: np.ndarray) -> np.ndarray:
    return np.array([sum(int(np.sum(~np.isfinite(b))) for b in blobs)], dtype=np.int64)


CASES = [
    OpCase("reduce_prod", prod_case, reference=prod_ref),
    OpCase("reduce_prod_grad", prod_grad_case, reference=prod_grad_ref, wrt=()),
    OpCase("reduce_any", logical_case, reference=logical_ref(np.any), wrt=()),
    OpCase("reduce_all", logical_case, reference=logical_ref(np.all), wrt=()),
    OpCase("reduce_logsumexp", logsumexp_case, reference=logsumexp_ref),
    OpCase("count_not_finite", count_case, reference=count_ref, wrt=()),
    OpCase("multi_count_not_finite", multi_count_case, reference=count_ref, wrt=()),
]
