"""Op cases of the legacy layout and indexing surface: pad, tile, reverse, tuple_identity, the nd
gathers and scatters, batch_gather. op_cases.py appends ``CASES`` to its table.

References are plain numpy, written independently of the kernels (loops over index rows, not the
kernels' vectorised indexing).
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


# pad / tile / reverse / tuple_identity ---------------------------------------------------
def pad_case(draw: Draw) -> Case:
    shape = _shape(draw)
    before = tuple(draw(st.integers(0, 2)) for _ in shape)
    after = tuple(draw(st.integers(0, 2)) for _ in shape)
    value = draw(st.sampled_from([0, 1.5, -2]))
    return [_array(draw, shape)], {"padding_before": before, "padding_after": after, "constant_value": value}


def pad_ref(x: np.ndarray, padding_before: Any, padding_after: Any, constant_value: Any) -> np.ndarray:
    out = np.full([d + b + a for d, b, a in zip(x.shape, padding_before, padding_after)], constant_value, x.dtype)
    for index in itertools.product(*(range(d) for d in x.shape)):
        out[tuple(i + b for i, b in zip(index, padding_before))] = x[index]
    return out


def tile_case(draw: Draw) -> Case:
    shape = _shape(draw, max_side=3)
    count = draw(st.integers(1, len(shape)))  # a short list counts from the last axis
    return [_array(draw, shape)], {"multiples": tuple(draw(st.integers(1, 3)) for _ in range(count))}


def reverse_case(draw: Draw) -> Case:
    shape = _shape(draw)
    rank = len(shape)
    axis = draw(st.one_of(st.integers(-rank, rank - 1),
                          st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True)))
    return [_array(draw, shape)], {"axis": axis}


def reverse_ref(x: np.ndarray, axis: Any) -> np.ndarray:
    axes = {a % x.ndim for a in ([axis] if isinstance(axis, int) else axis)}
    index = tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(x.ndim))
    return x[index]


def tuple_identity_case(draw: Draw) -> Case:
    return [_array(draw, _shape(draw)) for _ in range(draw(st.integers(1, 3)))], {}


# gather_nd / scatter_nd / tensor_scatter_nd_* ---------------------------------------------
def _nd_indices(draw: Draw, shape: tuple[int, ...], unique: bool) -> np.ndarray:
    """Rows of k leading coordinates into ``shape`` (k drawn), arranged in a batch of rank 1 or 2."""
    k = draw(st.integers(1, len(shape)))
    cells = list(itertools.product(*(range(d) for d in shape[:k])))
    if unique:
        rows = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=min(len(cells), 4), unique=True))
    else:  # repeats allowed: scatter_nd and tensor_scatter_nd_add must add them up
        rows = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=4))
    indices = np.array(rows, dtype=draw(st.sampled_from([np.int32, np.int64])))
    if len(rows) % 2 == 0 and draw(st.booleans()):
        indices = indices.reshape(2, len(rows) // 2, k)
    return indices


def _updates_shape(indices: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...]:
    return indices.shape[:-1] + shape[indices.shape[-1]:]


def _rows(indices: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row) for row in indices.reshape(-1, indices.shape[-1])]


def gather_nd_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape), _nd_indices(draw, shape, unique=False)], {}


def gather_nd_ref(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    out = np.stack([params[row] for row in _rows(indices)])
    return out.reshape(_updates_shape(indices, params.shape))


def scatter_nd_case(draw: Draw) -> Case:
    shape = _shape(draw)
    indices = _nd_indices(draw, shape, unique=False)
    return [indices, _array(draw, _updates_shape(indices, shape))], {"shape": shape}


def scatter_nd_ref(indices: np.ndarray, updates: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, updates.dtype)
    flat = updates.reshape((-1,) + tuple(shape[indices.shape[-1]:]))
    for row, value in zip(_rows(indices), flat):
        out[row] += value
    return out


def tensor_scatter_case(unique: bool) -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        indices = _nd_indices(draw, shape, unique=unique)
        return [_array(draw, shape), indices, _array(draw, _updates_shape(indices, shape))], {}

    return make


def tensor_scatter_ref(add: bool) -> Any:
    def ref(params: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
        out = params.copy()
        flat = updates.reshape((-1,) + params.shape[indices.shape[-1]:])
        for row, value in zip(_rows(indices), flat):
            out[row] = out[row] + value if add else value
        return out

    return ref


# batch_gather --------------------------------------------------------------------------
def batch_gather_case(draw: Draw) -> Case:
    shape = _shape(draw, 1, 3)
    m = draw(st.integers(1, len(shape)))  # indices rank: m - 1 batch axes, then the gathered axis
    count = draw(st.integers(1, 3))
    dim = shape[m - 1]
    indices = np.asarray(draw(fst.arrays(shape[:m - 1] + (count,), st.integers(0, dim - 1), dtype=np.int64)))
    return [_array(draw, shape), indices], {}


def batch_gather_ref(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    m = indices.ndim
    out = np.empty(params.shape[:m - 1] + (indices.shape[-1],) + params.shape[m:], params.dtype)
    for index in itertools.product(*(range(d) for d in indices.shape)):
        out[index] = params[index[:-1] + (indices[index],)]
    return out


def batch_gather_grad_case(draw: Draw) -> Case:
    (params, indices), _ = batch_gather_case(draw)
    dy = _array(draw, batch_gather_ref(params, indices).shape)
    return [indices, dy], {"shape": params.shape}


def batch_gather_grad_ref(indices: np.ndarray, dy: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dy.dtype)
    for index in itertools.product(*(range(d) for d in indices.shape)):
        out[index[:-1] + (indices[index],)] += dy[index]
    return out


CASES = [
    OpCase("pad", pad_case, reference=pad_ref),
    OpCase("tile", tile_case, reference=lambda x, multiples: np.tile(x, multiples)),
    OpCase("reverse", reverse_case, reference=reverse_ref),
    OpCase("tuple_identity", tuple_identity_case, reference=lambda *xs: tuple(x.copy() for x in xs)),
    OpCase("gather_nd", gather_nd_case, reference=gather_nd_ref, wrt=(0,)),
    OpCase("scatter_nd", scatter_nd_case, reference=scatter_nd_ref, wrt=(1,)),
    OpCase("tensor_scatter_nd_update", tensor_scatter_case(True), reference=tensor_scatter_ref(False), wrt=(0, 2)),
    OpCase("tensor_scatter_nd_add", tensor_scatter_case(False), reference=tensor_scatter_ref(True), wrt=(0, 2)),
    OpCase("batch_gather", batch_gather_case, reference=batch_gather_ref, wrt=(0,)),
    OpCase("batch_gather_grad", batch_gather_grad_case, reference=batch_gather_grad_ref, wrt=()),
]
