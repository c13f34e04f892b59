"""Indexing: slice, gather, where, argmax, one_hot; gather_nd, scatter_nd, tensor_scatter_nd_*, batch_gather."""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError, dtypes

from flowjob_ops.defs.common import broadcast_shape, normalize_axis, same_dtype


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


SLICE = OpDef("slice", _slice_infer, kernel=_slice_kernel, grad=_slice_grad, name_prefix="Slice",
              doc="a box of x: per axis begin (None = 0) and size (None or -1 = to the end)")
SLICE_GRAD = OpDef("slice_grad", _slice_grad_infer, kernel=_slice_grad_kernel, not_differentiable=True,
                   name_prefix="SliceGrad", doc="dy placed in the box of zeros shaped like the sliced input")


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
    return lambda params, indices: xp.take(params, indices, axis=axis, out=out)


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


GATHER = OpDef("gather", _gather_infer, kernel=_gather_kernel, grad=_gather_grad, name_prefix="Gather",
               doc="inputs (params, indices): params indexed along axis")
GATHER_GRAD = OpDef("gather_grad", _gather_grad_infer, kernel=_gather_grad_kernel, not_differentiable=True,
                    name_prefix="GatherGrad", traced_shape_from=(),
                    doc="inputs (indices, dy): dy scattered (summed) into zeros")


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


WHERE = OpDef("where", _where_infer, kernel=_where_kernel, grad=_where_grad, name_prefix="Where",
              doc="inputs (condition, x, y): x where condition, else y (broadcasting)")
WHERE_GRAD = OpDef("where_grad", _where_grad_infer, kernel=_where_grad_kernel, not_differentiable=True,
                   name_prefix="WhereGrad", doc="inputs (condition, dy): (dy where condition, dy elsewhere)")


# argmax / one_hot ---------------------------------------------------------------
def _argmax_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("argmax needs an input of rank >= 1")
    axis = normalize_axis(attrs.get("axis", -1), len(x.shape))
    return [BlobSpec(x.shape[:axis] + x.shape[axis + 1:], dtypes.int32)]


def _argmax_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", -1), len(ctx.inputs[0].shape))
    index = ctx.scratch(ctx.outputs[0].shape, dtype=xp.intp)  # argmax writes the platform index type only

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


ARGMAX = OpDef("argmax", _argmax_infer, kernel=_argmax_kernel, not_differentiable=True, name_prefix="Argmax",
               doc="int32 index of the (first) maximum along axis (default -1)")
ONE_HOT = OpDef("one_hot", _one_hot_infer, kernel=_one_hot_kernel, not_differentiable=True, name_prefix="OneHot",
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
                  name_prefix="GatherNd", doc="inputs (params, indices): the elements or slices indices name")
SCATTER_ND = OpDef("scatter_nd", _scatter_nd_infer, kernel=_scatter_nd_kernel, grad=_scatter_nd_grad,
                   name_prefix="ScatterNd", traced_shape_from=(),
                   doc="inputs (indices, updates): updates summed into zeros of shape")
TENSOR_SCATTER_ND_UPDATE = OpDef(
    "tensor_scatter_nd_update", _tensor_scatter_infer("tensor_scatter_nd_update"),
    kernel=_tensor_scatter_kernel(False), grad=_tensor_scatter_update_grad, name_prefix="TensorScatterNdUpdate",
    traced_shape_from=(0,),
    doc="inputs (params, indices, updates): params with the named elements or slices replaced by updates")
TENSOR_SCATTER_ND_ADD = OpDef(
    "tensor_scatter_nd_add", _tensor_scatter_infer("tensor_scatter_nd_add"),
    kernel=_tensor_scatter_kernel(True), grad=_tensor_scatter_add_grad, name_prefix="TensorScatterNdAdd",
    traced_shape_from=(0,),
    doc="inputs (params, indices, updates): params with updates added at the named elements or slices")


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
                     name_prefix="BatchGather",
                     doc="inputs (params, indices): params indexed along axis rank(indices)-1, per batch position")
BATCH_GATHER_GRAD = OpDef("batch_gather_grad", _batch_gather_grad_infer, kernel=_batch_gather_grad_kernel,
                          not_differentiable=True, name_prefix="BatchGatherGrad",
                          doc="inputs (indices, dy): dy summed into zeros at the gathered positions")

OPS = (SLICE, SLICE_GRAD, GATHER, GATHER_GRAD, WHERE, WHERE_GRAD, ARGMAX, ONE_HOT, GATHER_ND, SCATTER_ND,
       TENSOR_SCATTER_ND_UPDATE, TENSOR_SCATTER_ND_ADD, BATCH_GATHER, BATCH_GATHER_GRAD)
