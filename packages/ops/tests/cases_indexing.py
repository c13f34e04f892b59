"""Op cases of the indexing records beyond op_cases.py's table: the nd gathers and scatters, batch_gather,
the strided slices and their updates (slice_v2, slice_update), diag, dim_gather and their gradient ops, and the
pieces of split signatures (sharded_gather, its gradient, the class-split cross entropy's gradient, the mean over
a split axis).
op_cases.py appends ``CASES`` to its table.

References are plain numpy written apart from the kernels: loops over index rows and element loops over
index ranges, not the kernels' vectorised indexing.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


_shape, _array = base._shape, base._array


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


def _cells(shape: tuple[int, ...]) -> Any:
    return itertools.product(*(range(d) for d in shape))


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


def _sharded_table(draw: Draw) -> tuple[int, int, int, np.ndarray]:
    """(rows of the whole table, this piece's start and stop, indices into the whole table)."""
    rows = draw(st.integers(2, 6))
    start = draw(st.integers(0, rows - 1))
    stop = draw(st.integers(start + 1, rows))
    ids = np.array(draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=5)), dtype=np.int32)
    return rows, start, stop, ids


def sharded_gather_case(draw: Draw) -> Case:
    rows, start, stop, ids = _sharded_table(draw)
    return [_array(draw, (stop - start, 3)), ids], {"axis": 0, "shard_start": start, "shard_stop": stop}


def sharded_gather_ref(piece: np.ndarray, ids: np.ndarray, axis: int, shard_start: int, shard_stop: int) -> np.ndarray:
    out = np.zeros(ids.shape + piece.shape[1:], piece.dtype)
    for k, i in enumerate(ids):
        if shard_start <= i < shard_stop:
            out[k] = piece[i - shard_start]
    return out


def sharded_gather_grad_case(draw: Draw) -> Case:
    rows, start, stop, ids = _sharded_table(draw)
    return [ids, _array(draw, ids.shape + (3,))], {"axis": 0, "shape": (rows, 3), "shard_start": start,
                                                    "shard_stop": stop}


def sharded_gather_grad_ref(ids: np.ndarray, dy: np.ndarray, axis: int, shape: tuple[int, ...], shard_start: int,
                            shard_stop: int) -> np.ndarray:
    out = np.zeros((shard_stop - shard_start,) + tuple(shape[1:]), dy.dtype)
    for k, i in enumerate(ids):
        if shard_start <= i < shard_stop:
            out[i - shard_start] += dy[k]
    return out


def sharded_ce_grad_case(draw: Draw) -> Case:
    rows, classes = draw(st.integers(1, 4)), draw(st.integers(2, 6))
    start = draw(st.integers(0, classes - 1))
    stop = draw(st.integers(start + 1, classes))
    labels = np.array(draw(st.lists(st.integers(-1, classes), min_size=rows, max_size=rows)), dtype=np.int32)
    prob = _array(draw, (rows, stop - start), 0.0, 1.0)
    return [labels, prob, _array(draw, (rows,))], {"shard_start": start, "shard_stop": stop, "shard_size": classes}


def sharded_ce_grad_ref(labels: np.ndarray, prob: np.ndarray, dy: np.ndarray, shard_start: int,
                        shard_stop: int, shard_size: int) -> np.ndarray:
    out = prob * dy[:, None]
    for k, label in enumerate(labels):
        if not 0 <= label < shard_size:
            out[k] = 0  # a label outside the classes: no loss, no gradient
        elif shard_start <= label < shard_stop:
            out[k, label - shard_start] -= dy[k]
    return out


def sharded_mean_case(draw: Draw) -> Case:
    size = draw(st.integers(2, 6))
    start = draw(st.integers(0, size - 1))
    stop = draw(st.integers(start + 1, size))
    keepdims = draw(st.booleans())
    return [_array(draw, (stop - start, 3))], {"axis": draw(st.sampled_from([[0], None])), "keepdims": keepdims,
                                               "shard_start": start, "shard_stop": stop, "shard_size": size}


def sharded_mean_ref(piece: np.ndarray, axis: Any, keepdims: bool, shard_start: int, shard_stop: int,
                     shard_size: int) -> np.ndarray:
    axes = (0,) if axis == [0] else (0, 1)
    count = shard_size * (1 if axis == [0] else piece.shape[1])
    out = piece.sum(axis=axes, keepdims=keepdims) / count
    return out.reshape(-1) if not keepdims and axis is None else out


CASES = [
    OpCase("sharded_reduce_mean", sharded_mean_case, reference=sharded_mean_ref, wrt=()),
    OpCase("sharded_sparse_softmax_cross_entropy_grad", sharded_ce_grad_case, reference=sharded_ce_grad_ref, wrt=()),
    OpCase("sharded_gather", sharded_gather_case, reference=sharded_gather_ref, wrt=()),
    OpCase("sharded_gather_grad", sharded_gather_grad_case, reference=sharded_gather_grad_ref, wrt=()),
    OpCase("gather_nd", gather_nd_case, reference=gather_nd_ref, wrt=(0,)),
    OpCase("scatter_nd", scatter_nd_case, reference=scatter_nd_ref, wrt=(1,)),
    OpCase("tensor_scatter_nd_update", tensor_scatter_case(True), reference=tensor_scatter_ref(False), wrt=(0, 2)),
    OpCase("tensor_scatter_nd_add", tensor_scatter_case(False), reference=tensor_scatter_ref(True), wrt=(0, 2)),
    OpCase("batch_gather", batch_gather_case, reference=batch_gather_ref, wrt=(0,)),
    OpCase("batch_gather_grad", batch_gather_grad_case, reference=batch_gather_grad_ref, wrt=()),
    OpCase("slice_v2", slice_v2_case, reference=slice_v2_ref),
    OpCase("slice_update", slice_update_case, reference=slice_update_ref),
    OpCase("diag", diag_case, reference=diag_ref),
    OpCase("diag_grad", diag_grad_case, reference=diag_grad_ref),
    OpCase("dim_gather", dim_gather_case, reference=dim_gather_ref, wrt=(0,)),
    OpCase("dim_gather_grad", dim_gather_grad_case, reference=dim_gather_grad_ref, wrt=(0,)),
]
