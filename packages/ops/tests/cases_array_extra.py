"""Op cases of slice_v2, slice_update, diag, dim_gather (records/indexing.py), pad2d (records/padding.py),
range (records/constants.py), assign (records/assign.py) and their gradient ops. op_cases.py appends
``CASES`` to its table.

References are numpy written apart from the kernels: element loops over index ranges, ``np.pad``'s
own reflect / edge modes, ``np.arange``.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _shape(draw: Draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, max_dims, max_side)))


def _array(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False)))


def _cells(shape: tuple[int, ...]) -> Any:
    return itertools.product(*(range(d) for d in shape))


# slice_v2 / slice_update ----------------------------------------------------------------------
def _axis_slice(draw: Draw, dim: int) -> tuple[Any, Any, Any]:
    """(start, stop, step) selecting at least one element; None, negative values and steps drawn."""
    while True:
        step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
        start = draw(st.one_of(st.none(), st.integers(-dim, dim - 1)))
        stop = draw(st.one_of(st.none(), st.integers(-dim - 1, dim)))
        if len(range(*slice(start, stop, step).indices(dim))):
            return start, stop, step


def _positions(dim: int, start: Any, stop: Any, step: Any) -> list[int]:
    """The selected positions, by walking the axis as Python's slicing rules say."""
    step = 1 if step is None else step
    if step > 0:
        first = 0 if start is None else (start + dim if start < 0 else start)
        end = dim if stop is None else min(stop + dim if stop < 0 else stop, dim)
        return [i for i in range(first, end, step)]
    first = dim - 1 if start is None else (start + dim if start < 0 else start)
    end = -1 if stop is None else (max(stop + dim, -1) if stop < 0 else stop)
    return [i for i in range(first, end, step)]


def slice_v2_case(draw: Draw) -> Case:
    shape = _shape(draw)
    tups = [_axis_slice(draw, d) for d in shape]
    return [_array(draw, shape)], {k: tuple(t[i] for t in tups) for i, k in enumerate(("start", "stop", "step"))}


def _selected(shape: tuple[int, ...], start: Any, stop: Any, step: Any) -> list[list[int]]:
    return [_positions(d, b, e, s) for d, b, e, s in zip(shape, start, stop, step)]


def slice_v2_ref(x: np.ndarray, start: Any, stop: Any, step: Any) -> np.ndarray:
    axes = _selected(x.shape, start, stop, step)
    out = np.empty([len(a) for a in axes], x.dtype)
    for index in _cells(out.shape):
        out[index] = x[tuple(a[i] for a, i in zip(axes, index))]
    return out


def slice_update_case(draw: Draw) -> Case:
    (x,), attrs = slice_v2_case(draw)
    box = [len(a) for a in _selected(x.shape, attrs["start"], attrs["stop"], attrs["step"])]
    return [x, _array(draw, tuple(box))], attrs


def slice_update_ref(x: np.ndarray, update: np.ndarray, start: Any, stop: Any, step: Any) -> np.ndarray:
    axes = _selected(x.shape, start, stop, step)
    out = x.copy()
    for index in _cells(update.shape):
        out[tuple(a[i] for a, i in zip(axes, index))] = update[index]
    return out


# diag --------------------------------------------------------------------------------------------
def _on_diagonal(rows: int, cols: int, d: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(rows) for j in range(cols) if j - i == d]


def diag_case(draw: Draw) -> Case:
    if draw(st.booleans()):
        n = draw(st.integers(1, 4))
        return [_array(draw, (n,))], {"diagonal": draw(st.integers(-2, 2))}
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return [_array(draw, (rows, cols))], {"diagonal": draw(st.integers(1 - rows, cols - 1))}


def diag_ref(x: np.ndarray, diagonal: int) -> np.ndarray:
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        out = np.zeros((n, n), x.dtype)
        for k, cell in enumerate(_on_diagonal(n, n, diagonal)):
            out[cell] = x[k]
        return out
    return np.array([x[cell] for cell in _on_diagonal(*x.shape, diagonal)], x.dtype)


def diag_grad_case(draw: Draw) -> Case:
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d = draw(st.integers(1 - rows, cols - 1))
    n = len(_on_diagonal(rows, cols, d))
    return [_array(draw, (n,))], {"diagonal": d, "shape": (rows, cols)}


def diag_grad_ref(dy: np.ndarray, diagonal: int, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, dy.dtype)
    for k, cell in enumerate(_on_diagonal(*shape, diagonal)):
        out[cell] = dy[k]
    return out


# dim_gather -------------------------------------------------------------------------------------------
def _index(draw: Draw, shape: tuple[int, ...], dim: int, size: int) -> np.ndarray:
    """Indices in [0, size) of ``shape`` with axis ``dim`` of any length 1..4 (repeats allowed)."""
    shape = shape[:dim] + (draw(st.integers(1, 4)),) + shape[dim + 1:]
    values = draw(st.lists(st.integers(0, size - 1), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.array(values, dtype=draw(st.sampled_from([np.int32, np.int64]))).reshape(shape)


def dim_gather_case(draw: Draw) -> Case:
    shape = _shape(draw)
    dim = draw(st.integers(0, len(shape) - 1))
    return [_array(draw, shape), _index(draw, shape, dim, shape[dim])], {"dim": dim}


def dim_gather_ref(x: np.ndarray, index: np.ndarray, dim: int) -> np.ndarray:
    out = np.empty(index.shape, x.dtype)
    for cell in _cells(index.shape):
        source = list(cell)
        source[dim] = int(index[cell])
        out[cell] = x[tuple(source)]
    return out


def dim_gather_grad_case(draw: Draw) -> Case:
    shape = _shape(draw)
    dim = draw(st.integers(0, len(shape) - 1))
    index = _index(draw, shape, dim, shape[dim])
    return [_array(draw, index.shape), index], {"dim": dim, "shape": shape}


def dim_gather_grad_ref(dy: np.ndarray, index: np.ndarray, dim: int, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dy.dtype)
    for cell in _cells(index.shape):
        target = list(cell)
        target[dim] = int(index[cell])
        out[tuple(target)] += dy[cell]
    return out


# pad2d ---------------------------------------------------------------------------------------------------
_NP_MODE = {"reflect": "reflect", "replicate": "edge"}


def _pad2d_attrs(draw: Draw, h: int, w: int) -> dict:
    padding = (draw(st.integers(0, w - 1)), draw(st.integers(0, w - 1)), draw(st.integers(0, h - 1)),
               draw(st.integers(0, h - 1)))
    return {"mode": draw(st.sampled_from(sorted(_NP_MODE))), "padding": padding}


def pad2d_case(draw: Draw) -> Case:
    n, c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return [_array(draw, (n, c, h, w))], _pad2d_attrs(draw, h, w)


def _np_pad_width(padding: tuple[int, int, int, int]) -> tuple[tuple[int, int], ...]:
    left, right, top, bottom = padding
    return (0, 0), (0, 0), (top, bottom), (left, right)


def pad2d_ref(x: np.ndarray, mode: str, padding: tuple[int, int, int, int]) -> np.ndarray:
    return np.pad(x, _np_pad_width(padding), mode=_NP_MODE[mode])


def pad2d_grad_case(draw: Draw) -> Case:
    n, c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    attrs = _pad2d_attrs(draw, h, w)
    left, right, top, bottom = attrs["padding"]
    return [_array(draw, (n, c, h + top + bottom, w + left + right))], {**attrs, "shape": (n, c, h, w)}


def pad2d_grad_ref(dy: np.ndarray, mode: str, padding: tuple[int, int, int, int],
                   shape: tuple[int, ...]) -> np.ndarray:
    h, w = shape[2], shape[3]
    # where each padded element came from: np.pad applied to the flat positions of the plane
    source = np.pad(np.arange(h * w).reshape(1, 1, h, w), _np_pad_width(padding), mode=_NP_MODE[mode])[0, 0]
    out = np.zeros(shape, dy.dtype)
    for i, j in _cells(source.shape):
        out[:, :, source[i, j] // w, source[i, j] % w] += dy[:, :, i, j]
    return out


# range / assign ---------------------------------------------------------------------------------------------
def range_case(draw: Draw) -> Case:
    start = draw(st.integers(-5, 5))
    limit = start + draw(st.integers(1, 9))
    attrs = {"start": start, "limit": limit, "delta": draw(st.integers(1, limit - start)),
             "dtype": draw(st.sampled_from([np.dtype(t) for t in (np.int64, np.int32, np.float32, np.float64)]))}
    return [], attrs


def range_ref(start: int, limit: int, delta: int, dtype: Any) -> np.ndarray:
    return np.array(list(range(start, limit, delta)), dtype=dtype)


def assign_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape), _array(draw, shape)], {}


CASES = [
    OpCase("slice_v2", slice_v2_case, reference=slice_v2_ref),
    OpCase("slice_update", slice_update_case, reference=slice_update_ref),
    OpCase("diag", diag_case, reference=diag_ref),
    OpCase("diag_grad", diag_grad_case, reference=diag_grad_ref),
    OpCase("dim_gather", dim_gather_case, reference=dim_gather_ref, wrt=(0,)),
    OpCase("dim_gather_grad", dim_gather_grad_case, reference=dim_gather_grad_ref, wrt=(0,)),
    OpCase("pad2d", pad2d_case, reference=pad2d_ref),
    OpCase("pad2d_grad", pad2d_grad_case, reference=pad2d_grad_ref),
    OpCase("range", range_case, reference=range_ref, wrt=()),
    # no outputs: the case runs the kernel under the contract (value stays read-only, ref is the
    # declared mutated input); the assigned values are checked in tests/test_array_extra_legacy.py
    OpCase("assign", assign_case, reference=lambda ref, value: (), wrt=()),
]
