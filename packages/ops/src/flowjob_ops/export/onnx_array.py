"""Indexing, shape, selection and reduction ops as ONNX: ``gather_nd``, ``where``, slices and splits, tiles
and broadcasts, sorting (``TopK``), triangles and diagonals (static masks and gathers: every shape is known
when the job is traced), the logical and log-sum-exp reductions, and the ops a predict job makes constant
(``zeros_like``, ``constant``, dropout's inference identity).

Results take the record's dtype and shape: ONNX's int64 indices are cast to the record's int32, and a result
whose ONNX shape differs from the record's (a full reduction) is reshaped to it.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core.ir.job import Node

from flowjob_ops.export.onnx_elementwise import as_bool
from flowjob_ops.export.onnx_emitter import Emitter

Converter = Callable[[Emitter, Node], None]
INT64, FLOAT = 7, 1  # onnx.TensorProto
INT_MAX = np.iinfo(np.int64).max


def _to_output(e: Emitter, value: str, value_dtype: Any, out: str, stem: str) -> None:
    """``value`` as the record's output: cast to its dtype where ONNX gives another, reshaped to its shape."""
    if np.dtype(value_dtype) != e.dtype(out):
        value = e.add("Cast", [value], stem=stem, to=e.tensor_type(e.dtype(out)))
    e.add("Reshape", [value, e.constant(list(e.shape(out)), f"{stem}/shape", np.int64)], [out], stem)


def _int64(e: Emitter, x: str, stem: str) -> str:
    return x if e.dtype(x) == np.int64 else e.add("Cast", [x], stem=stem, to=INT64)


def _identity(e: Emitter, node: Node) -> None:
    for x, out in zip(node.inputs, node.outputs):
        e.add("Identity", [x], [out], node.name)


def _dropout(e: Emitter, node: Node) -> None:
    """A predict job's dropout: y = x, and the mask all ones (as the record's kernel outside training)."""
    y, mask = node.outputs
    e.add("Identity", [node.inputs[0]], [y], node.name)
    e.add("Identity", [e.constant(np.ones(e.shape(mask), e.dtype(mask)), f"{node.name}/mask")], [mask], node.name)


def _constant_output(value: Callable[[Emitter, Node, str], np.ndarray]) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        (out,) = node.outputs
        array = np.asarray(value(e, node, out), dtype=e.dtype(out)).reshape(e.shape(out))
        e.add("Identity", [e.constant(array, f"{node.name}/value")], [out], node.name)

    return convert


def _gather_nd(e: Emitter, node: Node) -> None:
    params, indices = node.inputs
    e.add("GatherND", [params, _int64(e, indices, node.name)], list(node.outputs), node.name)


def _where(e: Emitter, node: Node) -> None:
    condition, x, y = node.inputs
    e.add("Where", [as_bool(e, condition, node.name), x, y], list(node.outputs), node.name)


def _argmax(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    rank = max(len(e.shape(x)), 1)
    axis = int(node.attrs.get("axis", -1)) % rank
    source = x if e.shape(x) else e.add("Reshape", [x, e.constant([1], f"{node.name}/shape", np.int64)],
                                        stem=node.name)
    index = e.add("ArgMax", [source], stem=node.name, axis=axis, keepdims=0)  # the first maximum, as the record
    _to_output(e, index, np.int64, node.outputs[0], node.name)


def _tile(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    (out,) = node.outputs
    rank = len(e.shape(out))
    multiples = [int(m) for m in np.atleast_1d(node.attrs["multiples"])]
    padded = [1] * (rank - len(e.shape(x))) + list(e.shape(x))
    source = e.add("Reshape", [x, e.constant(padded, f"{node.name}/shape", np.int64)], stem=node.name)
    repeats = e.constant([1] * (rank - len(multiples)) + multiples, f"{node.name}/repeats", np.int64)
    e.add("Tile", [source, repeats], [out], node.name)


def _broadcast_to(e: Emitter, node: Node) -> None:
    (out,) = node.outputs
    e.add("Expand", [node.inputs[0], e.constant(list(e.shape(out)), f"{node.name}/shape", np.int64)], [out],
          node.name)


def _split(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    rank = len(e.shape(x))
    axis = int(node.attrs.get("axis", 0)) % rank
    e.split(x, axis, [e.shape(out)[axis] for out in node.outputs], list(node.outputs), node.name)


def _slice(e: Emitter, node: Node) -> None:
    """Legacy's ``slice``: per axis a begin (None: 0) and a size (None or -1: to the end)."""
    (x,) = node.inputs
    shape = e.shape(x)
    begins, sizes = list(node.attrs["begin"]), list(node.attrs["size"])
    starts, ends = [], []
    for axis, (begin, size) in enumerate(zip(begins, sizes)):
        start = 0 if begin is None else int(begin) % shape[axis] if int(begin) < 0 else int(begin)
        starts.append(start)
        ends.append(INT_MAX if size is None or int(size) == -1 else start + int(size))
    axes = list(range(len(starts)))
    e.slice(x, starts, ends, axes, [1] * len(axes), list(node.outputs), node.name)


def _slice_v2(e: Emitter, node: Node) -> None:
    """Python slices per axis (None open): ONNX's Slice clamps its bounds as Python does."""
    (x,) = node.inputs
    starts, ends, steps = [], [], []
    for start, stop, step in zip(node.attrs["start"], node.attrs["stop"], node.attrs["step"]):
        step = 1 if step is None else int(step)
        steps.append(step)
        starts.append((0 if step > 0 else INT_MAX) if start is None else int(start))
        ends.append((INT_MAX if step > 0 else -INT_MAX) if stop is None else int(stop))
    e.slice(x, starts, ends, list(range(len(steps))), steps, list(node.outputs), node.name)


def _reverse(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    rank = len(e.shape(x))
    axes = sorted({int(a) % rank for a in np.atleast_1d(node.attrs["axis"])})
    e.slice(x, [-1] * len(axes), [-INT_MAX] * len(axes), axes, [-1] * len(axes), list(node.outputs), node.name)


def _top(e: Emitter, x: str, k: int, largest: bool, stem: str) -> tuple[str, str]:
    """(values, int64 indices) of the k largest (or smallest) along the last axis, in order."""
    axis = len(e.shape(x)) - 1
    count = e.constant([k], f"{stem}/k", np.int64)
    values, indices = e.fresh(f"{stem}/values"), e.fresh(f"{stem}/indices")
    if largest or e.opset >= 11:
        attrs = {} if largest else {"largest": 0}
        e.add("TopK", [x, count], [values, indices], stem, axis=axis, **attrs)
        return values, indices
    # opset 10's TopK takes the largest only: the smallest of x are the largest of -x
    e.add("TopK", [e.add("Neg", [x], stem=stem), count], [values, indices], stem, axis=axis)
    return e.add("Neg", [values], stem=stem), indices


def _top_k(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    (out,) = node.outputs
    _values, indices = _top(e, x, e.shape(out)[-1], True, node.name)
    _to_output(e, indices, np.int64, out, node.name)


def _sorting(indices_only: bool) -> Converter:
    def convert(e: Emitter, node: Node) -> None:
        (x,) = node.inputs
        (out,) = node.outputs
        if not e.shape(x):  # one element: itself, at index 0
            if indices_only:
                _to_output(e, e.constant(0, f"{node.name}/index", np.int64), np.int64, out, node.name)
            else:
                e.add("Identity", [x], [out], node.name)
            return
        descending = node.attrs.get("direction", "ASCENDING") == "DESCENDING"
        values, indices = _top(e, x, e.shape(x)[-1], descending, node.name)
        if indices_only:
            _to_output(e, indices, np.int64, out, node.name)
        else:
            e.add("Identity", [values], [out], node.name)

    return convert


def _tril(e: Emitter, node: Node) -> None:
    """The lower triangle (j <= i + diagonal) through a constant mask; fill_value above it."""
    (x,) = node.inputs
    rows, cols = e.shape(x)[-2:]
    mask = np.tril(np.ones((rows, cols), bool), int(node.attrs.get("diagonal", 0)))
    fill = e.constant(node.attrs.get("fill_value", 0), f"{node.name}/fill", e.dtype(x))
    e.add("Where", [e.constant(mask, f"{node.name}/mask"), x, fill], list(node.outputs), node.name)


def _diag(e: Emitter, node: Node) -> None:
    """A matrix's diagonal gathered from its flat elements; a vector's matrix gathered from the vector and a
    zero (every off-diagonal cell takes the zero)."""
    (x,) = node.inputs
    (out,) = node.outputs
    d = int(node.attrs.get("diagonal", 0))
    flat = e.add("Reshape", [x, e.constant([-1], f"{node.name}/flat", np.int64)], stem=node.name)
    if len(e.shape(x)) == 2:
        cols = e.shape(x)[1]
        (n,) = e.shape(out)
        rows = np.arange(n) + max(-d, 0)
        index = rows * cols + rows + d
        e.add("Gather", [flat, e.constant(index, f"{node.name}/index", np.int64)], [out], node.name, axis=0)
        return
    (n,) = e.shape(x)
    size = e.shape(out)[0]
    index = np.full((size, size), n, np.int64)
    for i in range(n):
        index[i + max(-d, 0), i + max(d, 0)] = i
    padded = e.add("Concat", [flat, e.constant([0], f"{node.name}/zero", e.dtype(x))], stem=node.name, axis=0)
    e.add("Gather", [padded, e.constant(index, f"{node.name}/index", np.int64)], [out], node.name, axis=0)


def _axes(e: Emitter, node: Node) -> list[int]:
    rank = len(e.shape(node.inputs[0]))
    axis = node.attrs.get("axis")
    return list(range(rank)) if axis is None else sorted({int(a) % rank for a in np.atleast_1d(axis)})


def _logical_reduce(op_type: str) -> Converter:
    """reduce_all / reduce_any: the min / max of the truth values (as floats, which every opset reduces)."""

    def convert(e: Emitter, node: Node) -> None:
        truth = e.add("Cast", [as_bool(e, node.inputs[0], node.name)], stem=node.name, to=FLOAT)
        reduced = e.reduce(op_type, truth, _axes(e, node), bool(node.attrs.get("keepdims", False)), None, node.name)
        _to_output(e, reduced, np.float32, node.outputs[0], node.name)

    return convert


def _reduce_logsumexp(e: Emitter, node: Node) -> None:
    """log(sum(exp(x - m))) + m with m the (kept) maximum, as the record computes it: no overflow."""
    (x,) = node.inputs
    axes = _axes(e, node)
    top = e.reduce("ReduceMax", x, axes, True, None, node.name)
    summed = e.reduce("ReduceSum", e.add("Exp", [e.add("Sub", [x, top], stem=node.name)], stem=node.name), axes,
                      True, None, node.name)
    result = e.add("Add", [e.add("Log", [summed], stem=node.name), top], stem=node.name)
    _to_output(e, result, e.dtype(x), node.outputs[0], node.name)  # the kept axes dropped where keepdims is off


def _square_sum(e: Emitter, node: Node) -> None:
    (x,) = node.inputs
    axes = list(range(len(e.shape(x))))
    _to_output(e, e.reduce("ReduceSumSquare", x, axes, False, None, node.name), e.dtype(x), node.outputs[0],
               node.name)


def _l2_normalize(e: Emitter, node: Node) -> None:
    """y = x / sqrt(max(sum(x^2 over axis), epsilon)) and the sum of squares (the axis kept as 1)."""
    (x,) = node.inputs
    y, square_sum = node.outputs
    axis = int(node.attrs.get("axis", -1)) % len(e.shape(x))
    summed = e.reduce("ReduceSumSquare", x, [axis], True, [square_sum], node.name)
    eps = e.constant(float(node.attrs.get("epsilon", 1e-12)), f"{node.name}/epsilon", e.dtype(x))
    norm = e.add("Sqrt", [e.add("Max", [summed, eps], stem=node.name)], stem=node.name)
    e.add("Div", [x, norm], [y], node.name)


def _one_hot(e: Emitter, node: Node) -> None:
    """Each index compared with 0..depth-1 laid along the new axis (onnxruntime's OneHot runs few dtypes)."""
    (indices,) = node.inputs
    (out,) = node.outputs
    rank = len(e.shape(out))
    axis = int(node.attrs.get("axis", -1)) % rank
    spread = list(e.shape(out))
    spread[axis] = 1
    index = e.add("Reshape", [_int64(e, indices, node.name), e.constant(spread, f"{node.name}/spread", np.int64)],
                  stem=node.name)
    positions = np.arange(int(node.attrs["depth"]), dtype=np.int64).reshape(
        [-1 if i == axis else 1 for i in range(rank)])
    hit = e.add("Equal", [index, e.constant(positions, f"{node.name}/positions")], stem=node.name)
    on, off = (e.constant(node.attrs.get(key, default), f"{node.name}/{key}", e.dtype(out))
               for key, default in (("on_value", 1), ("off_value", 0)))
    e.add("Where", [hit, on, off], [out], node.name)


def _constant_value(e: Emitter, node: Node, out: str) -> np.ndarray:
    return np.full(e.shape(out), node.attrs["value"])


def _fill(value: float) -> Callable[[Emitter, Node, str], np.ndarray]:
    return lambda e, node, out: np.full(e.shape(out), value)


def _range_value(e: Emitter, node: Node, out: str) -> np.ndarray:
    return np.arange(node.attrs["start"], node.attrs["limit"], node.attrs.get("delta", 1))


def _shape_elem_cnt_value(e: Emitter, node: Node, out: str) -> np.ndarray:
    shape = e.shape(node.inputs[0])
    axis = node.attrs.get("axis")
    axes = range(len(shape)) if axis is None else sorted({int(a) % len(shape) for a in np.atleast_1d(axis)})
    return np.asarray([int(np.prod([shape[a] for a in axes]))])


def _count_not_finite(e: Emitter, node: Node) -> None:
    """int64 (1,): the inf and nan elements of every input."""
    counts = []
    for x in node.inputs:
        bad = e.add("Or", [e.add("IsNaN", [x], stem=node.name), e.add("IsInf", [x], stem=node.name)], stem=node.name)
        flat = e.add("Reshape", [e.add("Cast", [bad], stem=node.name, to=INT64),
                                 e.constant([-1], f"{node.name}/flat", np.int64)], stem=node.name)
        counts.append(e.reduce("ReduceSum", flat, [0], True, None, node.name))
    total = counts[0]
    for count in counts[1:]:  # Add: Sum takes no integers before opset 13
        total = e.add("Add", [total, count], stem=node.name)
    _to_output(e, total, np.int64, node.outputs[0], node.name)


def _multi_square_sum(e: Emitter, node: Node) -> None:
    sums = []
    for x in node.inputs:
        flat = e.add("Reshape", [x, e.constant([-1], f"{node.name}/flat", np.int64)], stem=node.name)
        sums.append(e.reduce("ReduceSumSquare", flat, [0], True, None, node.name))
    total = sums[0] if len(sums) == 1 else e.add("Sum", sums, stem=node.name)
    _to_output(e, total, e.dtype(node.inputs[0]), node.outputs[0], node.name)


def _split_like(e: Emitter, node: Node) -> None:
    x = node.inputs[0]
    axis = int(node.attrs.get("axis", 0)) % len(e.shape(x))
    e.split(x, axis, [e.shape(out)[axis] for out in node.outputs], list(node.outputs), node.name)


def _dim_gather(e: Emitter, node: Node) -> None:
    x, index = node.inputs
    axis = int(node.attrs.get("dim", 0)) % len(e.shape(x))
    e.add("GatherElements", [x, _int64(e, index, node.name)], list(node.outputs), node.name, axis=axis)


def _batch_gather(e: Emitter, node: Node) -> None:
    """params indexed along axis rank(indices) - 1, the axes before it batch axes (GatherND's batch_dims)."""
    params, indices = node.inputs
    index = _int64(e, indices, node.name)
    batch = len(e.shape(indices)) - 1
    if batch == 0:
        e.add("Gather", [params, index], list(node.outputs), node.name, axis=0)
        return
    column = e.unsqueeze(index, [batch + 1], None, node.name)
    e.add("GatherND", [params, column], list(node.outputs), node.name, batch_dims=batch)


def _scatter(kind: str) -> Converter:
    """ScatterND into zeros of ``shape`` (scatter_nd, duplicates summed), or into params (update / add)."""

    def convert(e: Emitter, node: Node) -> None:
        if kind == "scatter_nd":
            indices, updates = node.inputs
            base = e.constant(np.zeros(e.shape(node.outputs[0]), e.dtype(updates)), f"{node.name}/zeros")
        else:
            base, indices, updates = node.inputs
        index = _int64(e, indices, node.name)
        if kind == "update":
            e.add("ScatterND", [base, index, updates], list(node.outputs), node.name)
            return
        # ScatterND adds (and sums duplicate indices) from opset 16: before, the emitter refuses the attribute
        e.add("ScatterND", [base, index, updates], list(node.outputs), node.name, reduction="add")

    return convert


def _segment_sum(batched: bool) -> Converter:
    """Sums by segment id as one product with the ids' one-hot matrix (an id outside [0, S) matches no
    segment and adds nothing, as the records): data reshaped (P, I, Q) around the ids' axes, the mask
    (I, S), out = mask^T @ data (batched: per row of axis 0). A non-finite value reaches every segment of
    its row as NaN (0 * inf), where the record adds it to its own segment only."""

    def convert(e: Emitter, node: Node) -> None:
        data, ids = node.inputs[:2]
        (out,) = node.outputs
        shape, id_shape = e.shape(data), e.shape(ids)
        # batched: the ids' leading axes are batch axes, their last the one summed over
        first = len(id_shape) - 1 if batched else int(node.attrs.get("axis", 0)) % len(shape)
        lead = int(np.prod(shape[:first], dtype=np.int64))
        count = int(np.prod(id_shape[first:] if batched else id_shape, dtype=np.int64))
        tail = int(np.prod(shape[first + (1 if batched else len(id_shape)):], dtype=np.int64))
        segments = e.shape(out)[first]
        stem = node.name
        rows = e.add("Reshape", [data, e.constant([lead, count, tail], f"{stem}/rows", np.int64)], stem=stem)
        index = e.add("Reshape", [_int64(e, ids, stem), e.constant([lead if batched else 1, count, 1],
                                                                   f"{stem}/ids", np.int64)], stem=stem)
        hit = e.add("Equal", [index, e.constant(np.arange(segments, dtype=np.int64).reshape(1, 1, -1),
                                                f"{stem}/segments")], stem=stem)
        mask = e.add("Transpose", [e.add("Cast", [hit], stem=stem, to=e.tensor_type(e.dtype(data)))], stem=stem,
                     perm=[0, 2, 1])
        e.add("Reshape", [e.add("MatMul", [mask, rows], stem=stem), e.constant(list(e.shape(out)), f"{stem}/out",
                                                                                np.int64)], [out], stem)

    return convert


def _slice_update(e: Emitter, node: Node) -> None:
    """x with the Python slices (None open) replaced by update: ScatterND at the slices' static indices."""
    x, update = node.inputs
    shape = e.shape(x)
    starts, stops, steps = (list(node.attrs[key]) for key in ("start", "stop", "step"))
    ranges = [np.arange(n)[slice(*(None if v is None else int(v) for v in bounds))]
              for n, bounds in zip(shape, zip(starts, stops, steps))]
    ranges += [np.arange(n) for n in shape[len(ranges):]]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).astype(np.int64)
    target = e.add("Reshape", [update, e.constant(list(grid.shape[:-1]), f"{node.name}/shape", np.int64)],
                   stem=node.name)
    e.add("ScatterND", [x, e.constant(grid, f"{node.name}/indices"), target], list(node.outputs), node.name)


CONVERTERS: dict[str, Converter] = {
    "gather_nd": _gather_nd, "where": _where, "argmax": _argmax, "tile": _tile, "broadcast_to": _broadcast_to,
    "split": _split, "slice": _slice, "slice_v2": _slice_v2, "reverse": _reverse,
    "top_k": _top_k, "sort": _sorting(False), "arg_sort": _sorting(True), "tril": _tril, "diag": _diag,
    "reduce_all": _logical_reduce("ReduceMin"), "reduce_any": _logical_reduce("ReduceMax"),
    "reduce_logsumexp": _reduce_logsumexp, "square_sum": _square_sum, "l2_normalize": _l2_normalize,
    "one_hot": _one_hot, "tuple_identity": _identity, "amp_white_identity": _identity, "dropout": _dropout,
    "zeros_like": _constant_output(_fill(0)), "ones_like": _constant_output(_fill(1)),
    "constant": _constant_output(_constant_value), "constant_like": _constant_output(_constant_value),
    "range": _constant_output(_range_value), "shape_elem_cnt": _constant_output(_shape_elem_cnt_value),
    "count_not_finite": _count_not_finite, "multi_count_not_finite": _count_not_finite,
    "multi_square_sum": _multi_square_sum, "split_like": _split_like, "broadcast_to_compatible_with": _broadcast_to,
    "dim_gather": _dim_gather, "batch_gather": _batch_gather, "scatter_nd": _scatter("scatter_nd"),
    "tensor_scatter_nd_update": _scatter("update"), "tensor_scatter_nd_add": _scatter("add"),
    "unsorted_segment_sum": _segment_sum(False), "unsorted_segment_sum_like": _segment_sum(False),
    "unsorted_batch_segment_sum": _segment_sum(True), "slice_update": _slice_update,
}
"""op type -> converter, for the indexing, shape and selection ops."""

__all__ = ["CONVERTERS"]
