"""Indexing: slice, gather, where, argmax, one_hot; gather_nd, scatter_nd, tensor_scatter_nd_*, batch_gather;
strided slices and their updates (slice_v2, slice_update), diag, dim_gather.

Gradients are graph nodes: slice_v2 <-> slice_update (each one's gradient is the other, with
zeros), diag <-> diag_grad, dim_gather <-> dim_gather_grad (adjoint pairs).
"""
from __future__ import annotations

import builtins
import math
import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError, ShapeTraits
from flowjob_core.ir import dtypes

from flowjob_ops.records.common import broadcast_shape, is_int, normalize_axis, same_dtype
from flowjob_ops import layout_rules


# slice ------------------------------------------------------------------------
def slice_bounds(shape: Sequence[int], begin: Any, size: Any) -> tuple[slice, ...]:
    """Legacy ``flow.slice`` bounds: per axis a begin (None = 0) and a size (None or -1 = to the end)."""
    rank = len(shape)
    begin = [None] * rank if begin is None else list(begin)
    size = [None] * rank if size is None else list(size)
    if len(begin) != rank or len(size) != rank:
        raise ShapeError(f"slice begin {begin} and size {size} need one entry per axis of the {rank}-d input "
                         f"{tuple(shape)}")
    bounds = []
    for axis, (dim, b, s) in enumerate(zip(shape, begin, size)):
        b = 0 if b is None else b
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not -dim <= b < max(dim, 1):
            raise ShapeError(f"slice begin {b!r} is out of range for axis {axis} of size {dim}")
        b = int(b) % dim if dim else 0
        if s is None or s == -1:
            s = dim - b
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 or b + s > dim:
            raise ShapeError(f"slice size {s!r} at begin {b} does not fit axis {axis} of size {dim}")
        bounds.append(slice(b, b + int(s)))
    return tuple(bounds)


def _slice_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    bounds = slice_bounds(x.shape, attrs.get("begin"), attrs.get("size"))
    return [BlobSpec(tuple(s.stop - s.start for s in bounds), x.dtype)]


def _slice_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    bounds = slice_bounds(ctx.inputs[0].shape, ctx.attrs.get("begin"), ctx.attrs.get("size"))

    def run(x: Any) -> Any:
        xp.copyto(out, x[bounds])
        return out

    return run


def _slice_grad(ctx: GradContext) -> list[Any]:
    attrs = {"begin": ctx.attrs.get("begin"), "size": ctx.attrs.get("size"), "shape": ctx.inputs[0].shape}
    return [ctx.apply("slice_grad", [ctx.dy], attrs)]


def _slice_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (dy,) = inputs
    shape = tuple(attrs["shape"])
    bounds = slice_bounds(shape, attrs.get("begin"), attrs.get("size"))
    if dy.shape != tuple(s.stop - s.start for s in bounds):
        raise ShapeError(f"slice_grad: dy {dy.shape} does not match the slice {bounds} of {shape}")
    return [BlobSpec(shape, dy.dtype)]


def _slice_grad_kernel(ctx: KernelContext) -> Any:
    out = ctx.out(0)
    bounds = slice_bounds(ctx.attrs["shape"], ctx.attrs.get("begin"), ctx.attrs.get("size"))

    def run(dy: Any) -> Any:
        out.fill(0)
        out[bounds] = dy
        return out

    return run


SLICE = OpDef("slice", _slice_infer, kernel=_slice_kernel, grad=_slice_grad,
              doc="a box of x: per axis begin (None = 0) and size (None or -1 = to the end)",
              compute=Compute(layouts=layout_rules.slice_box, amp="clear"))
SLICE_GRAD = OpDef("slice_grad", _slice_grad_infer, kernel=_slice_grad_kernel, not_differentiable=True,
                   doc="dy placed in the box of zeros shaped like the sliced input",
                   compute=Compute(layouts=layout_rules.slice_box))


# gather -----------------------------------------------------------------------
def _check_indices(spec: BlobSpec, what: str) -> None:
    if spec.dtype.kind not in "iu":
        raise ShapeError(f"{what} must be integers, got {spec.dtype}")


def _gather_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    params, indices = inputs
    _check_indices(indices, "gather indices")
    if not params.shape:
        raise ShapeError("gather needs params of rank >= 1")
    axis = normalize_axis(attrs.get("axis", 0), len(params.shape))
    return [BlobSpec(params.shape[:axis] + indices.shape + params.shape[axis + 1:], params.dtype)]


def _gather_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.inputs[0].shape))
    if ctx.backend.host_arrays:  # numpy's take raises IndexError itself
        return lambda params, indices: xp.take(params, indices, axis=axis, out=out)
    size = ctx.inputs[0].shape[axis]

    def checked(params: Any, indices: Any) -> Any:
        # a device's take wraps an index out of range around (CuPy's does): refuse it as numpy does,
        # at the cost of reading one flag back from the device
        if indices.size and bool(xp.any((indices < -size) | (indices >= size))):
            raise IndexError(f"gather: an index is out of bounds for axis {axis} with size {size}")
        return xp.take(params, indices, axis=axis, out=out)

    return checked


def _gather_grad(ctx: GradContext) -> list[Any]:
    params, indices = ctx.inputs
    attrs = {"axis": ctx.attrs.get("axis", 0), "shape": params.shape}
    return [ctx.apply("gather_grad", [indices, ctx.dy], attrs), None]


def _gather_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    indices, dy = inputs
    shape = tuple(attrs["shape"])
    axis = normalize_axis(attrs.get("axis", 0), len(shape))
    if dy.shape != shape[:axis] + indices.shape + shape[axis + 1:]:
        raise ShapeError(f"gather_grad: dy {dy.shape} does not match gathering {indices.shape} from {shape}")
    return [BlobSpec(shape, dy.dtype)]


def _gather_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.outputs[0].shape))
    lead = (slice(None),) * axis

    def run(indices: Any, dy: Any) -> Any:
        out.fill(0)
        xp.add.at(out, lead + (indices,), dy)  # repeated indices accumulate
        return out

    return run


GATHER = OpDef("gather", _gather_infer, kernel=_gather_kernel, grad=_gather_grad,
               doc="inputs (params, indices): params indexed along axis",
               compute=Compute(layouts=layout_rules.gather, amp="clear"))
GATHER_GRAD = OpDef("gather_grad", _gather_grad_infer, kernel=_gather_grad_kernel, not_differentiable=True,
                    doc="inputs (indices, dy): dy scattered (summed) into zeros",
                    compute=Compute(layouts=layout_rules.gather_grad), shape=ShapeTraits(traced_shape_from=()))


# where ------------------------------------------------------------------------
def _where_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    cond, x, y = inputs
    if cond.dtype.kind not in "biu":
        raise ShapeError(f"where condition must be bool or integer, got {cond.dtype}")
    dtype = same_dtype([x, y], "where")
    shape = broadcast_shape(broadcast_shape(cond.shape, x.shape, "where operands"), y.shape, "where operands")
    return [BlobSpec(shape, dtype)]


def _as_bool(ctx: KernelContext, spec: BlobSpec) -> Any:
    """A converter of the condition to bool (a scratch array for integer conditions)."""
    if spec.dtype.kind == "b":
        return lambda c: c
    xp, mask = ctx.xp, ctx.scratch(spec.shape, dtype=bool)
    return lambda c: xp.not_equal(c, 0, out=mask)


def _where_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    as_bool = _as_bool(ctx, ctx.inputs[0])

    def run(cond: Any, x: Any, y: Any) -> Any:
        xp.copyto(out, y)  # copyto broadcasts all three
        xp.copyto(out, x, where=as_bool(cond))
        return out

    return run


def _where_grad(ctx: GradContext) -> list[Any]:
    dx, dy = ctx.apply("where_grad", [ctx.inputs[0], ctx.dy])
    return [None, dx, dy]


def _where_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[1], inputs[1]]


def _where_grad_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    dx, dy_else = ctx.out(0), ctx.out(1)
    as_bool = _as_bool(ctx, ctx.inputs[0])

    def run(cond: Any, dy: Any) -> tuple[Any, Any]:
        xp.multiply(dy, as_bool(cond), out=dx)
        xp.subtract(dy, dx, out=dy_else)
        return dx, dy_else

    return run


WHERE = OpDef("where", _where_infer, kernel=_where_kernel, grad=_where_grad,
              doc="inputs (condition, x, y): x where condition, else y (broadcasting)", compute=Compute(amp="black"))
WHERE_GRAD = OpDef("where_grad", _where_grad_infer, kernel=_where_grad_kernel, not_differentiable=True,
                   doc="inputs (condition, dy): (dy where condition, dy elsewhere)")


# argmax / one_hot ---------------------------------------------------------------
def _argmax_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("argmax needs an input of rank >= 1")
    axis = normalize_axis(attrs.get("axis", -1), len(x.shape))
    # legacy's rule: the reduced axis dropped, and a 1-d input gives shape (1,), not a 0-d blob
    return [BlobSpec(x.shape[:axis] + x.shape[axis + 1:] or (1,), dtypes.int32)]


def _argmax_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", -1), len(ctx.inputs[0].shape))
    reduced = ctx.inputs[0].shape[:axis] + ctx.inputs[0].shape[axis + 1:]  # () for a 1-d input: out is (1,)
    index = ctx.scratch(reduced, dtype=xp.intp)  # argmax writes the platform index type only

    def run(x: Any) -> Any:
        xp.argmax(x, axis=axis, out=index)
        xp.copyto(out, index, casting="unsafe")
        return out

    return run


def _one_hot_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (indices,) = inputs
    _check_indices(indices, "one_hot indices")
    depth = attrs.get("depth")
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
        raise ShapeError(f"one_hot depth must be a positive int, got {depth!r}")
    axis = normalize_axis(attrs.get("axis", -1), len(indices.shape) + 1)
    try:
        dtype = dtypes.as_dtype(attrs.get("dtype") or dtypes.float32)
    except TypeError as exc:
        raise ShapeError(f"one_hot: {exc}") from None
    return [BlobSpec(indices.shape[:axis] + (int(depth),) + indices.shape[axis:], dtype)]


def _one_hot_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    rank = len(spec.shape)
    axis = normalize_axis(ctx.attrs.get("axis", -1), rank)
    classes = xp.arange(spec.shape[axis]).reshape(tuple(-1 if i == axis else 1 for i in range(rank)))
    expanded = ctx.inputs[0].shape[:axis] + (1,) + ctx.inputs[0].shape[axis:]
    hit = ctx.scratch(spec.shape, dtype=bool)
    on = spec.dtype.type(ctx.attrs.get("on_value", 1))
    off = spec.dtype.type(ctx.attrs.get("off_value", 0))

    def run(indices: Any) -> Any:
        xp.equal(indices.reshape(expanded), classes, out=hit)
        out.fill(off)
        xp.copyto(out, on, where=hit)
        return out

    return run


ARGMAX = OpDef("argmax", _argmax_infer, kernel=_argmax_kernel, not_differentiable=True,
               doc="int32 index of the (first) maximum along axis (default -1); a 1-d input gives shape (1,)",
               compute=Compute(amp="black"))
ONE_HOT = OpDef("one_hot", _one_hot_infer, kernel=_one_hot_kernel, not_differentiable=True,
                doc="on_value at each index along a new axis of length depth, off_value elsewhere")

# gather_nd / scatter_nd / tensor_scatter_nd_* ------------------------------------------
# indices (..., k) name elements (k == rank) or slices (k < rank) of a rank-r blob: the last
# axis of indices holds the first k coordinates; repeated indices accumulate in scatter_nd and
# tensor_scatter_nd_add, and the last write wins in tensor_scatter_nd_update (as in legacy).
def _nd_split(indices: BlobSpec, shape: Sequence[int], op: str) -> tuple[int, ...]:
    """The shape of the updates (gathered slices) for ``indices`` into ``shape``."""
    _check_indices(indices, f"{op} indices")
    if not indices.shape:
        raise ShapeError(f"{op} indices must have rank >= 1 (the last axis holds coordinates)")
    k = indices.shape[-1]
    if not 1 <= k <= len(shape):
        raise ShapeError(f"{op} indices {indices.shape} hold {k} coordinates, the indexed shape {tuple(shape)} "
                         f"has rank {len(shape)}")
    return indices.shape[:-1] + tuple(shape[k:])


def _nd_index(indices: Any) -> tuple[Any, ...]:
    return tuple(indices[..., i] for i in range(indices.shape[-1]))


def _gather_nd_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    params, indices = inputs
    return [BlobSpec(_nd_split(indices, params.shape, "gather_nd"), params.dtype)]


def _gather_nd_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(params: Any, indices: Any) -> Any:
        xp.copyto(out, params[_nd_index(indices)])
        return out

    return run


def _gather_nd_grad(ctx: GradContext) -> list[Any]:
    params, indices = ctx.inputs
    return [ctx.apply("scatter_nd", [indices, ctx.dy], {"shape": params.shape}), None]


def _scatter_nd_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    indices, updates = inputs
    shape = attrs.get("shape")
    if shape is None or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 for d in shape):
        raise ShapeError(f"scatter_nd shape must be a sequence of positive ints, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    want = _nd_split(indices, shape, "scatter_nd")
    if updates.shape != want:
        raise ShapeError(f"scatter_nd updates {updates.shape} do not match indices {indices.shape} into {shape}: "
                         f"expected {want}")
    return [BlobSpec(shape, updates.dtype)]


def _scatter_nd_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(indices: Any, updates: Any) -> Any:
        out.fill(0)
        xp.add.at(out, _nd_index(indices), updates)
        return out

    return run


def _scatter_nd_grad(ctx: GradContext) -> list[Any]:
    return [None, ctx.apply("gather_nd", [ctx.dy, ctx.inputs[0]])]


def _tensor_scatter_infer(op: str) -> Any:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        params, indices, updates = inputs
        same_dtype([params, updates], op)
        want = _nd_split(indices, params.shape, op)
        if updates.shape != want:
            raise ShapeError(f"{op} updates {updates.shape} do not match indices {indices.shape} into "
                             f"{params.shape}: expected {want}")
        return [params]

    return infer


def _tensor_scatter_kernel(accumulate: bool) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)

        def run(params: Any, indices: Any, updates: Any) -> Any:
            xp.copyto(out, params)
            if accumulate:
                xp.add.at(out, _nd_index(indices), updates)
            else:
                out[_nd_index(indices)] = updates
            return out

        return run

    return build


def _tensor_scatter_update_grad(ctx: GradContext) -> list[Any]:
    _, indices, updates = ctx.inputs
    d_params = None
    if ctx.needs[0]:  # the overwritten elements pass no gradient back to params
        zeros = ctx.apply("zeros_like", [updates])
        d_params = ctx.apply("tensor_scatter_nd_update", [ctx.dy, indices, zeros])
    d_updates = ctx.apply("gather_nd", [ctx.dy, indices]) if ctx.needs[2] else None
    return [d_params, None, d_updates]


def _tensor_scatter_add_grad(ctx: GradContext) -> list[Any]:
    d_updates = ctx.apply("gather_nd", [ctx.dy, ctx.inputs[1]]) if ctx.needs[2] else None
    return [ctx.dy, None, d_updates]


GATHER_ND = OpDef("gather_nd", _gather_nd_infer, kernel=_gather_nd_kernel, grad=_gather_nd_grad,
                  doc="inputs (params, indices): the elements or slices indices name", compute=Compute(amp="black"))
SCATTER_ND = OpDef("scatter_nd", _scatter_nd_infer, kernel=_scatter_nd_kernel, grad=_scatter_nd_grad,
                   doc="inputs (indices, updates): updates summed into zeros of shape", compute=Compute(amp="black"),
                   shape=ShapeTraits(traced_shape_from=()))
TENSOR_SCATTER_ND_UPDATE = OpDef(
    "tensor_scatter_nd_update", _tensor_scatter_infer("tensor_scatter_nd_update"), kernel=_tensor_scatter_kernel(False),
    grad=_tensor_scatter_update_grad,
    doc="inputs (params, indices, updates): params with the named elements or slices replaced by updates",
    compute=Compute(amp="black"), shape=ShapeTraits(traced_shape_from=(0,)))
TENSOR_SCATTER_ND_ADD = OpDef(
    "tensor_scatter_nd_add", _tensor_scatter_infer("tensor_scatter_nd_add"), kernel=_tensor_scatter_kernel(True),
    grad=_tensor_scatter_add_grad,
    doc="inputs (params, indices, updates): params with updates added at the named elements or slices",
    compute=Compute(amp="black"), shape=ShapeTraits(traced_shape_from=(0,)))


# batch_gather ------------------------------------------------------------------------
# indices of rank m index axis m-1 of params separately for each of the leading m-1 (batch)
# positions, which indices shares with params: out[b, j, ...] = params[b, indices[b, j], ...].
def _batch_gather_out(params: Sequence[int], indices: BlobSpec, op: str) -> tuple[int, ...]:
    _check_indices(indices, f"{op} indices")
    m = len(indices.shape)
    if not 1 <= m <= len(params):
        raise ShapeError(f"{op} indices {indices.shape} need rank 1..{len(params)} for params {tuple(params)}")
    if tuple(indices.shape[:m - 1]) != tuple(params[:m - 1]):
        raise ShapeError(f"{op} indices {indices.shape} and params {tuple(params)} differ on the batch axes "
                         f"(the first {m - 1})")
    return tuple(params[:m - 1]) + (indices.shape[-1],) + tuple(params[m:])


def _batch_gather_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    params, indices = inputs
    return [BlobSpec(_batch_gather_out(params.shape, indices, "batch_gather"), params.dtype)]


def _batch_gather_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    params, indices = ctx.inputs
    m = len(indices.shape)
    spread = indices.shape + (1,) * (len(params.shape) - m)  # take_along_axis broadcasts the trailing axes

    def run(x: Any, idx: Any) -> Any:
        xp.copyto(out, xp.take_along_axis(x, idx.reshape(spread), axis=m - 1))
        return out

    return run


def _batch_gather_grad(ctx: GradContext) -> list[Any]:
    params, indices = ctx.inputs
    return [ctx.apply("batch_gather_grad", [indices, ctx.dy], {"shape": params.shape}), None]


def _batch_gather_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    indices, dy = inputs
    shape = tuple(attrs["shape"])
    if dy.shape != _batch_gather_out(shape, indices, "batch_gather_grad"):
        raise ShapeError(f"batch_gather_grad: dy {dy.shape} does not match gathering {indices.shape} from {shape}")
    return [BlobSpec(shape, dy.dtype)]


def _batch_gather_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    indices = ctx.inputs[0]
    shape = ctx.outputs[0].shape
    m = len(indices.shape)
    batch = math.prod(shape[:m - 1])
    rest = math.prod(shape[m:])
    # (batch, n, rest) views: row b of indices scatters into block b of out
    out3 = out.reshape(batch, shape[m - 1], rest)
    rows = xp.arange(batch).reshape(batch, 1)

    def run(idx: Any, dy: Any) -> Any:
        out.fill(0)
        xp.add.at(out3, (rows, idx.reshape(batch, -1)), dy.reshape(batch, -1, rest))
        return out

    return run


BATCH_GATHER = OpDef("batch_gather", _batch_gather_infer, kernel=_batch_gather_kernel, grad=_batch_gather_grad,
                     doc="inputs (params, indices): params indexed along axis rank(indices)-1, per batch position",
                     compute=Compute(amp="black"))
BATCH_GATHER_GRAD = OpDef("batch_gather_grad", _batch_gather_grad_infer, kernel=_batch_gather_grad_kernel,
                          not_differentiable=True,
                          doc="inputs (indices, dy): dy summed into zeros at the gathered positions")


# slice_v2 / slice_update: strided boxes (each one's gradient is the other, with zeros) ---------------
def strided_bounds(shape: Sequence[int], start: Any, stop: Any, step: Any) -> tuple[slice, ...]:
    """Legacy ``slice_v2`` bounds: per axis Python slice semantics of (start, stop, step), None = open.

    start must lie in [-size, size) and stop in [-size-1, size] (legacy's check_slice_tup_list);
    a step of 0 or a box without elements is an error, except on an axis that is itself empty (a dynamic
    feed with a zero-length axis, which legacy sliced to an empty blob).
    """
    rank = len(shape)
    items = [tuple(v) if v is not None else (None,) * rank for v in (start, stop, step)]
    if any(len(v) != rank for v in items):
        raise ShapeError(f"slice start {start}, stop {stop} and step {step} need one entry per axis of the "
                         f"{rank}-d input {tuple(shape)}")
    bounds = []
    for axis, (dim, b, e, s) in enumerate(zip(shape, *items)):
        if any(v is not None and not is_int(v) for v in (b, e, s)):
            raise ShapeError(f"slice entries must be ints or None, got ({b!r}, {e!r}, {s!r}) for axis {axis}")
        s = 1 if s is None else int(s)
        if s == 0:
            raise ShapeError(f"slice step of axis {axis} can't be 0")
        if b is not None and not -dim <= b < dim:
            raise ShapeError(f"slice start {b} of axis {axis} must be in [-{dim}, {dim})")
        if e is not None and not -dim - 1 <= e <= dim:
            raise ShapeError(f"slice stop {e} of axis {axis} must be in [-{dim + 1}, {dim}]")
        bound = builtins.slice(b, e, s)
        if dim and len(range(*bound.indices(dim))) == 0:
            raise ShapeError(f"slice ({b}, {e}, {s}) selects nothing from axis {axis} of size {dim}")
        bounds.append(bound)
    return tuple(bounds)


def _box(shape: Sequence[int], attrs: dict) -> tuple[slice, ...]:
    return strided_bounds(shape, attrs.get("start"), attrs.get("stop"), attrs.get("step"))


def _box_shape(shape: Sequence[int], bounds: Sequence[slice]) -> tuple[int, ...]:
    return tuple(len(range(*b.indices(d))) for b, d in zip(bounds, shape))


def _slice_attrs(attrs: dict) -> dict:
    return {k: attrs.get(k) for k in ("start", "stop", "step")}


def _slice_v2_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    return [BlobSpec(_box_shape(x.shape, _box(x.shape, attrs)), x.dtype)]


def _slice_v2_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    bounds = _box(ctx.inputs[0].shape, ctx.attrs)

    def run(x: Any) -> Any:
        xp.copyto(out, x[bounds])
        return out

    return run


def _slice_v2_grad(ctx: GradContext) -> list[Any]:
    zeros = ctx.apply("zeros_like", [ctx.inputs[0]])
    return [ctx.apply("slice_update", [zeros, ctx.dy], _slice_attrs(ctx.attrs))]


def _slice_update_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, update = inputs
    same_dtype(inputs, "slice_update")
    box = _box_shape(x.shape, _box(x.shape, attrs))
    if update.shape != box:
        raise ShapeError(f"slice_update: update {update.shape} must have the slice's shape {box}")
    return [x]


def _slice_update_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    bounds = _box(ctx.inputs[0].shape, ctx.attrs)

    def run(x: Any, update: Any) -> Any:  # a new blob: x itself is left as it was
        xp.copyto(out, x)
        out[bounds] = update
        return out

    return run


def _slice_update_grad(ctx: GradContext) -> list[Any]:
    attrs = _slice_attrs(ctx.attrs)
    zeros = ctx.apply("zeros_like", [ctx.inputs[1]])
    return [ctx.apply("slice_update", [ctx.dy, zeros], attrs), ctx.apply("slice_v2", [ctx.dy], attrs)]


SLICE_V2 = OpDef("slice_v2", _slice_v2_infer, kernel=_slice_v2_kernel, grad=_slice_v2_grad,
                 doc="x[start:stop:step] per axis (Python slice semantics, None = open)", compute=Compute(amp="clear"),
                 legacy=LegacyFace(name_prefix="Slice"))


SLICE_UPDATE = OpDef("slice_update", _slice_update_infer, kernel=_slice_update_kernel, grad=_slice_update_grad,
                     doc="a copy of x whose box x[start:stop:step] holds update", compute=Compute(amp="black"))


# diag <-> diag_grad (an adjoint pair) ----------------------------------------------------------------
def _diagonal(attrs: dict) -> int:
    d = attrs.get("diagonal", 0)
    if not is_int(d):
        raise ShapeError(f"diag diagonal must be an int, got {d!r}")
    return int(d)


def _diag_len(shape: Sequence[int], d: int) -> int:
    rows, cols = shape
    return min(rows, cols - d) if d >= 0 else min(rows + d, cols)


def _diag_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    d = _diagonal(attrs)
    if len(x.shape) == 1:
        n = x.shape[0] + abs(d)
        return [BlobSpec((n, n), x.dtype)]
    if len(x.shape) != 2:
        raise ShapeError(f"diag takes a 1-d or 2-d input, got shape {x.shape}")
    n = _diag_len(x.shape, d)
    if n <= 0:
        raise ShapeError(f"diag: diagonal {d} lies outside the {x.shape} matrix")
    return [BlobSpec((n,), x.dtype)]


def _diag_positions(shape: Sequence[int], d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of diagonal ``d`` of a matrix of ``shape``."""
    n = _diag_len(shape, d)
    k = np.arange(n)
    return (k, k + d) if d >= 0 else (k - d, k)


def _diag_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    d = _diagonal(ctx.attrs)
    x_shape = ctx.inputs[0].shape
    matrix = ctx.outputs[0].shape if len(x_shape) == 1 else x_shape
    rows, cols = (xp.asarray(p) for p in _diag_positions(matrix, d))

    if len(x_shape) == 1:
        def run(x: Any) -> Any:
            out.fill(0)
            out[rows, cols] = x
            return out
    else:
        def run(x: Any) -> Any:
            xp.copyto(out, x[rows, cols])
            return out

    return run


def _diag_grad(ctx: GradContext) -> list[Any]:
    d = _diagonal(ctx.attrs)
    x = ctx.inputs[0]
    if len(x.shape) == 1:  # the vector went onto a diagonal: read it back
        return [ctx.apply("diag", [ctx.dy], {"diagonal": d})]
    return [ctx.apply("diag_grad", [ctx.dy], {"diagonal": d, "shape": x.shape})]


def _diag_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (dy,) = inputs
    shape = tuple(attrs["shape"])
    if len(shape) != 2 or len(dy.shape) != 1 or dy.shape[0] != _diag_len(shape, _diagonal(attrs)):
        raise ShapeError(f"diag_grad: dy {dy.shape} is not diagonal {attrs.get('diagonal')} of a {shape} matrix")
    return [BlobSpec(shape, dy.dtype)]


def _diag_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rows, cols = (xp.asarray(p) for p in _diag_positions(ctx.attrs["shape"], _diagonal(ctx.attrs)))

    def run(dy: Any) -> Any:
        out.fill(0)
        out[rows, cols] = dy
        return out

    return run


def _diag_grad_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("diag", [ctx.dy], {"diagonal": _diagonal(ctx.attrs)})]


DIAG = OpDef("diag", _diag_infer, kernel=_diag_kernel, grad=_diag_grad,
             doc="a vector put on diagonal `diagonal` of a square matrix, or a matrix's diagonal read out",
             compute=Compute(amp="black"))


DIAG_GRAD = OpDef("diag_grad", _diag_grad_infer, kernel=_diag_grad_kernel, grad=_diag_grad_grad,
                  doc="dy placed on diagonal `diagonal` of a zero matrix of `shape`")


# dim_gather <-> dim_gather_grad (an adjoint pair) ----------------------------------------------------
def _dim_gather_check(x: BlobSpec, index: BlobSpec, attrs: dict, op: str) -> int:
    if index.dtype.kind not in "iu":
        raise ShapeError(f"{op} index must be an integer blob, got {index.dtype}")
    if len(x.shape) != len(index.shape) or not x.shape:
        raise ShapeError(f"{op}: input {x.shape} and index {index.shape} need the same rank (>= 1)")
    dim = normalize_axis(attrs.get("dim", 0), len(x.shape), "dim")
    if any(a != b for i, (a, b) in enumerate(zip(x.shape, index.shape)) if i != dim):
        raise ShapeError(f"{op}: input {x.shape} and index {index.shape} must match except at dim {dim}")
    return dim


def _dim_gather_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, index = inputs
    _dim_gather_check(x, index, attrs, "dim_gather")
    return [BlobSpec(index.shape, x.dtype)]


def _open_grid(xp: Any, shape: Sequence[int], dim: int, index: Any) -> tuple[Any, ...]:
    """Index arrays addressing, for each element of ``index``, its own position with axis ``dim``
    replaced by the element's value."""
    rank = len(shape)
    grid = [xp.arange(n).reshape((1,) * a + (n,) + (1,) * (rank - a - 1)) for a, n in enumerate(shape)]
    grid[dim] = index
    return tuple(grid)


def _dim_gather_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dim = normalize_axis(ctx.attrs.get("dim", 0), len(ctx.inputs[0].shape), "dim")

    def run(x: Any, index: Any) -> Any:
        xp.copyto(out, x[_open_grid(xp, index.shape, dim, index)])
        return out

    return run


def _dim_gather_grad(ctx: GradContext) -> list[Any]:
    x, index = ctx.inputs
    attrs = {"dim": ctx.attrs.get("dim", 0), "shape": x.shape}
    return [ctx.apply("dim_gather_grad", [ctx.dy, index], attrs), None]


def _dim_gather_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, index = inputs
    x = BlobSpec(tuple(attrs["shape"]), dy.dtype)
    _dim_gather_check(x, index, attrs, "dim_gather_grad")
    if dy.shape != index.shape:
        raise ShapeError(f"dim_gather_grad: dy {dy.shape} must have the index's shape {index.shape}")
    return [x]


def _dim_gather_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dim = normalize_axis(ctx.attrs.get("dim", 0), len(ctx.outputs[0].shape), "dim")

    def run(dy: Any, index: Any) -> Any:
        out.fill(0)
        xp.add.at(out, _open_grid(xp, index.shape, dim, index), dy)  # repeated indices accumulate
        return out

    return run


def _dim_gather_grad_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("dim_gather", [ctx.dy, ctx.inputs[1]], {"dim": ctx.attrs.get("dim", 0)}), None]


DIM_GATHER = OpDef("dim_gather", _dim_gather_infer, kernel=_dim_gather_kernel, grad=_dim_gather_grad,
                   doc="inputs (input, index): input read at index along dim (the "
                       "other axes of index name their own position)", compute=Compute(amp="black"))


DIM_GATHER_GRAD = OpDef("dim_gather_grad", _dim_gather_grad_infer, kernel=_dim_gather_grad_kernel,
                        grad=_dim_gather_grad_grad,
                        doc="inputs (dy, index): dy summed into zeros of `shape` where dim_gather read")

OPS = (SLICE, SLICE_GRAD, GATHER, GATHER_GRAD, WHERE, WHERE_GRAD, ARGMAX, ONE_HOT, GATHER_ND, SCATTER_ND,
       TENSOR_SCATTER_ND_UPDATE, TENSOR_SCATTER_ND_ADD, BATCH_GATHER, BATCH_GATHER_GRAD, SLICE_V2, SLICE_UPDATE,
       DIAG, DIAG_GRAD, DIM_GATHER, DIM_GATHER_GRAD)
