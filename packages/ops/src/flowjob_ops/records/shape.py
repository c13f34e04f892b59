"""Shape and layout ops: reshape, identity, transpose, concat, split, cast, tile, reverse,
tuple_identity, and ``shape_elem_cnt`` (which reads only the input's shape).

reshape and identity are views (``view=True``): their kernels return the input itself or a
view of it, and the planner keeps the input's buffer alive as long as the view is read.
The other gradients are graph nodes of existing ops: tile -> reshape + reduce_sum,
reverse -> reverse, tuple_identity -> its output gradients.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import (
    BlobSpec, Compute, Effects, GradContext, KernelContext, LegacyFace, OpDef, ShapeError, ShapeTraits)
from flowjob_core.ir import dtypes

from flowjob_ops.records.common import int_list, normalize_axes, normalize_axis, same_as_first, same_dtype
from flowjob_ops import layout_rules


# reshape / identity -----------------------------------------------------------
def resolve_shape(shape: Any, size: int, source: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its one -1 filled in; checks that the element count is unchanged."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise ShapeError(f"reshape shape must be a sequence of ints, got {shape!r}") from None
    if any(isinstance(d, bool) for d in shape):
        raise ShapeError(f"reshape shape must be a sequence of ints, got {shape!r}")
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1 or any(d < -1 or d == 0 for d in dims):
        raise ShapeError(f"reshape shape {tuple(shape)} may hold positive sizes and at most one -1")
    known = 1
    for d in dims:
        known *= d if d != -1 else 1
    if unknown:
        if size % known:
            raise ShapeError(f"cannot reshape {source} ({size} elements) to {tuple(shape)}: {size} is not a "
                             f"multiple of {known}")
        dims[unknown[0]] = size // known
    elif known != size:
        raise ShapeError(f"cannot reshape {source} ({size} elements) to {tuple(shape)} ({known} elements)")
    return tuple(dims)


def _reshape_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    return [BlobSpec(resolve_shape(attrs.get("shape"), x.size, x.shape), x.dtype)]


def _reshape_kernel(ctx: KernelContext) -> Any:
    shape = ctx.outputs[0].shape
    return lambda x: x.reshape(shape)


def _reshape_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("reshape", [ctx.dy], {"shape": ctx.inputs[0].shape})]


def _identity_kernel(ctx: KernelContext) -> Any:
    return lambda x: x


def _identity_grad(ctx: GradContext) -> list[Any]:
    return [ctx.dy]


RESHAPE = OpDef("reshape", _reshape_infer, kernel=_reshape_kernel, grad=_reshape_grad,
                doc="the same elements in a new shape (one -1 is inferred); a view",
                compute=Compute(layouts=layout_rules.linear_unary, amp="clear"), effects=Effects(view=True),
                shape=ShapeTraits(target_shape_attr="shape"))
IDENTITY = OpDef("identity", same_as_first, kernel=_identity_kernel, grad=_identity_grad, doc="x itself",
                 compute=Compute(layouts=layout_rules.linear_unary, amp="clear"), effects=Effects(view=True))
# legacy's marker for auto mixed precision: x itself, a white-list op, so what it reads runs in float16
AMP_WHITE_IDENTITY = OpDef(
    "amp_white_identity", same_as_first, kernel=_identity_kernel,
    grad=lambda ctx: [ctx.apply("amp_white_identity", [ctx.dy])],
    doc="x itself, in the white list of auto mixed precision (its gradient too)", compute=Compute(amp="white"),
    effects=Effects(view=True), legacy=LegacyFace(input_names=("in",), attr_names=()))


# transpose ------------------------------------------------------------------
def _perm(attrs: dict, rank: int) -> tuple[int, ...]:
    perm = attrs.get("perm")
    if perm is None:
        return tuple(reversed(range(rank)))
    items = [normalize_axis(p, rank, "perm entry") for p in perm]
    if sorted(items) != list(range(rank)):
        raise ShapeError(f"transpose perm {tuple(perm)} is not a permutation of the {rank} axes")
    return tuple(items)


def _transpose_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    return [BlobSpec(tuple(x.shape[p] for p in _perm(attrs, len(x.shape))), x.dtype)]


def _transpose_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    perm = _perm(ctx.attrs, len(ctx.inputs[0].shape))

    def run(x: Any) -> Any:  # a contiguous copy: later kernels read rows
        xp.copyto(out, x.transpose(perm))
        return out

    return run


def _transpose_grad(ctx: GradContext) -> list[Any]:
    perm = _perm(ctx.attrs, len(ctx.inputs[0].shape))
    return [ctx.apply("transpose", [ctx.dy], {"perm": tuple(int(i) for i in np.argsort(perm))})]


TRANSPOSE = OpDef("transpose", _transpose_infer, kernel=_transpose_kernel, grad=_transpose_grad,
                  doc="axes permuted by perm (default: reversed)",
                  compute=Compute(layouts=layout_rules.transpose, amp="clear"))


# concat / split -----------------------------------------------------------------
def _concat_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs:
        raise ShapeError("concat needs at least one input")
    dtype = same_dtype(inputs, "concat")
    first = inputs[0].shape
    if not first:
        raise ShapeError("concat needs inputs of rank >= 1")
    axis = normalize_axis(attrs.get("axis", 0), len(first))
    for spec in inputs[1:]:
        if len(spec.shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(spec.shape, first)) if i != axis):
            raise ShapeError(f"concat along axis {axis}: shapes {first} and {spec.shape} differ off that axis")
    total = sum(spec.shape[axis] for spec in inputs)
    return [BlobSpec(first[:axis] + (total,) + first[axis + 1:], dtype)]


def _concat_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.outputs[0].shape))
    return lambda *xs: xp.concatenate(xs, axis=axis, out=out)


def _concat_grad(ctx: GradContext) -> list[Any]:
    if len(ctx.inputs) == 1:
        return [ctx.dy]
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.dy.shape))
    sizes = tuple(b.shape[axis] for b in ctx.inputs)
    return list(ctx.apply("split", [ctx.dy], {"axis": axis, "sizes": sizes}))


# concat of dynamic blobs bounded by max_dim_size (legacy's concat attribute) ---------------------------
def _bounded_concat_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (joined,) = _concat_infer(inputs, attrs)
    bound = attrs.get("max_dim_size")
    if isinstance(bound, bool) or not isinstance(bound, numbers.Integral) or bound < 0:
        raise ShapeError(f"concat: max_dim_size must be a non-negative int, got {bound!r}")
    axis = normalize_axis(attrs.get("axis", 0), len(joined.shape))
    return [BlobSpec(joined.shape[:axis] + (int(bound),) + joined.shape[axis + 1:], joined.dtype)]


def _bounded_concat_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.outputs[0].shape))
    bound = int(ctx.attrs["max_dim_size"])

    def run(*xs: Any) -> Any:
        extent = sum(x.shape[axis] for x in xs)
        if extent > bound:
            raise ValueError(f"concat {ctx.node_name!r}: the inputs add up to {extent} along axis {axis} at this "
                             f"step, more than max_dim_size={bound}")
        shape = out.shape[:axis] + (extent,) + out.shape[axis + 1:]
        joined = out.reshape(-1)[:int(np.prod(shape))].reshape(shape)  # the buffer's head, in the actual shape
        return xp.concatenate(xs, axis=axis, out=joined)

    return run


def _bounded_concat_grad(ctx: GradContext) -> list[Any]:
    parts = ctx.apply("concat_split_like", [ctx.dy, *ctx.inputs], {"axis": ctx.attrs.get("axis", 0)})
    return list(parts) if len(ctx.inputs) > 1 else [parts]


def _split_like_head_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, likes = inputs[0], inputs[1:]
    axis = normalize_axis(attrs.get("axis", 0), len(x.shape))
    if any(len(like.shape) != len(x.shape) for like in likes):
        raise ShapeError(f"concat_split_like: the like blobs {[s.shape for s in likes]} need the rank of {x.shape}")
    return [BlobSpec(x.shape[:axis] + (like.shape[axis],) + x.shape[axis + 1:], x.dtype) for like in likes]


def _split_like_head_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.inputs[0].shape))
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]

    def run(dy: Any, *likes: Any) -> Any:
        start = 0
        for out, like in zip(outs, likes):
            size = like.shape[axis]
            xp.copyto(out, dy[(slice(None),) * axis + (slice(start, start + size),)])
            start += size
        return tuple(outs) if len(outs) > 1 else outs[0]

    return run


BOUNDED_CONCAT = OpDef(
    "bounded_concat", _bounded_concat_infer, kernel=_bounded_concat_kernel, grad=_bounded_concat_grad,
    doc="legacy's concat(max_dim_size=N) of dynamic blobs: planned at N along axis, the step's extent the "
        "inputs' actual sum (at most N)", compute=Compute(amp="clear"), shape=ShapeTraits(dynamic_extent=True),
    legacy=LegacyFace(name_prefix="Concat"))
CONCAT_SPLIT_LIKE = OpDef(
    "concat_split_like", _split_like_head_infer, kernel=_split_like_head_kernel, not_differentiable=True,
    doc="inputs (dy, *likes): dy's head along axis cut into pieces as long as each like blob there "
        "(bounded_concat's gradient)", compute=Compute(amp="clear"))


def _split_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("split needs an input of rank >= 1")
    axis = normalize_axis(attrs.get("axis", 0), len(x.shape))
    sizes = tuple(attrs.get("sizes") or ())
    if not sizes or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 for s in sizes):
        raise ShapeError(f"split sizes must be positive ints, got {attrs.get('sizes')!r}")
    if sum(sizes) != x.shape[axis]:
        raise ShapeError(f"split sizes {sizes} add up to {sum(sizes)}, axis {axis} of {x.shape} has {x.shape[axis]}")
    return [BlobSpec(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]


def _split_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    rank = len(ctx.inputs[0].shape)
    axis = normalize_axis(ctx.attrs.get("axis", 0), rank)
    outs, parts, start = [], [], 0
    for i, size in enumerate(ctx.attrs["sizes"]):
        outs.append(ctx.out(i))
        parts.append((slice(None),) * axis + (slice(start, start + size),))
        start += size
    pairs = list(zip(outs, parts))

    def run(x: Any) -> Any:
        for out, part in pairs:
            xp.copyto(out, x[part])
        return tuple(outs) if len(outs) > 1 else outs[0]  # one output: the plan expects the array itself

    return run


def _split_grad(ctx: GradContext) -> list[Any]:
    parts = [g if g is not None else ctx.apply("zeros_like", [out]) for g, out in zip(ctx.out_grads, ctx.outputs)]
    if len(parts) == 1:
        return parts
    return [ctx.apply("concat", parts, {"axis": ctx.attrs.get("axis", 0)})]


CONCAT = OpDef("concat", _concat_infer, kernel=_concat_kernel, grad=_concat_grad, doc="inputs joined along axis",
               compute=Compute(layouts=layout_rules.concat, amp="clear"))
SPLIT = OpDef("split", _split_infer, kernel=_split_kernel, grad=_split_grad,
              doc="the input cut along axis into pieces of the given sizes (one output each)",
              compute=Compute(layouts=layout_rules.split_pieces, amp="black"))


# cast -------------------------------------------------------------------------
def _cast_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    try:
        dtype = dtypes.as_dtype(attrs.get("dtype"))
    except TypeError as exc:
        raise ShapeError(f"cast: {exc}") from None
    return [BlobSpec(x.shape, dtype)]


def _cast_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        xp.copyto(out, x, casting="unsafe")
        return out

    return run


def _cast_grad(ctx: GradContext) -> list[Any]:
    # legacy's rule for every pair of dtypes: the output gradient cast back, so a float blob cast to int8,
    # multiplied and cast back still gets a gradient (in int8 arithmetic on the way)
    return [ctx.apply("cast", [ctx.dy], {"dtype": ctx.inputs[0].dtype})]


CAST = OpDef("cast", _cast_infer, kernel=_cast_kernel, grad=_cast_grad,
             doc="x converted to dtype; its gradient is the output gradient cast back, for every dtype",
             compute=Compute(layouts=layout_rules.same_shape_elementwise, amp="black"))


# fused_cast_scale (legacy's fuse-cast-scale pass target, also callable by name) ------------------------
def _fused_cast_scale_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, scale_by_tensor = inputs
    if scale_by_tensor.shape != (1,):
        raise ShapeError(f"fused_cast_scale: scale_by_tensor must have shape (1,), got {scale_by_tensor.shape}")
    if scale_by_tensor.dtype.kind != "f":
        raise ShapeError(f"fused_cast_scale: scale_by_tensor must be floating, got {scale_by_tensor.dtype}")
    if not isinstance(attrs.get("scale", 1.0), numbers.Real):
        raise ShapeError(f"fused_cast_scale: scale must be a number, got {attrs.get('scale')!r}")
    return [BlobSpec(x.shape, scale_by_tensor.dtype)]


def _fused_cast_scale_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dtype = ctx.outputs[0].dtype
    scale = float(ctx.attrs.get("scale", 1.0))

    def run(x: Any, scale_by_tensor: Any) -> Any:
        # as legacy's kernel: y = T(x) * (scale_by_tensor[0] * scale), the factor formed once in T
        factor = (scale_by_tensor[0] * dtype.type(scale)).astype(dtype)
        xp.copyto(out, x, casting="unsafe")
        xp.multiply(out, factor, out=out)
        return out

    return run


FUSED_CAST_SCALE = OpDef("fused_cast_scale", _fused_cast_scale_infer, kernel=_fused_cast_scale_kernel,
                         not_differentiable=True,
                         doc="inputs (x, scale_by_tensor of shape (1,)): x cast to scale_by_tensor's dtype, times "
                             "scale_by_tensor[0] * scale (legacy registered no gradient)", compute=Compute(amp="black"),
                         legacy=LegacyFace(input_names=("x", "scale_by_tensor"), attr_names=("scale",),
                                           output_names=("y",),
                                           # v0.3.4's name (v0.4 renamed it)
                                           legacy_input_names=(("scalar", "scale_by_tensor"),)))


# broadcast_to_compatible_with (its shape read from its inputs, so dynamic blobs reach it) ---------------
def _compatible_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    shapes = [spec.shape for spec in inputs]
    try:
        return [BlobSpec(tuple(np.broadcast_shapes(*shapes)), inputs[0].dtype)]
    except ValueError:
        raise ShapeError(f"broadcast_to_compatible_with: shapes {shapes} do not broadcast") from None


def _compatible_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any, *compatible: Any) -> Any:
        xp.copyto(out, x)  # copyto broadcasts; the other inputs give only their shapes
        return out

    return run


def _compatible_grad(ctx: GradContext) -> list[Any]:
    # the compatible blobs give only their shapes: no gradient reaches them, as in legacy
    return [ctx.apply("unbroadcast", [ctx.dy], {"shape": ctx.inputs[0].shape})] + [None] * (len(ctx.inputs) - 1)


BROADCAST_TO_COMPATIBLE_WITH = OpDef(
    "broadcast_to_compatible_with", _compatible_infer, kernel=_compatible_kernel, grad=_compatible_grad,
    doc="inputs (x, *compatible): x broadcast to the broadcast shape of all inputs, taken from them at each call",
    compute=Compute(amp="black"))


# tile ------------------------------------------------------------------------------------------------
def _tile_multiples(attrs: dict, rank: int) -> tuple[int, ...]:
    """One multiple per axis; a shorter list applies to the trailing axes (numpy's rule)."""
    multiples = int_list(attrs.get("multiples"), "tile multiples")
    if any(m < 1 for m in multiples):
        raise ShapeError(f"tile multiples must be >= 1, got {multiples}")
    if len(multiples) > rank:
        raise ShapeError(f"tile multiples {multiples} name more axes than the rank-{rank} input has")
    return (1,) * (rank - len(multiples)) + multiples


def _tile_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    multiples = _tile_multiples(attrs, len(x.shape))
    return [BlobSpec(tuple(d * m for d, m in zip(x.shape, multiples)), x.dtype)]


def _tile_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    shape = ctx.inputs[0].shape
    multiples = _tile_multiples(ctx.attrs, len(shape))
    # out seen as (m0, d0, m1, d1, ...): x broadcast over the m axes fills every copy in one call
    interleaved = out.reshape(tuple(v for m, d in zip(multiples, shape) for v in (m, d)))
    spread = tuple(v for d in shape for v in (1, d))

    def run(x: Any) -> Any:
        xp.copyto(interleaved, x.reshape(spread))
        return out

    return run


def _tile_grad(ctx: GradContext) -> list[Any]:
    shape = ctx.inputs[0].shape
    multiples = _tile_multiples(ctx.attrs, len(shape))
    interleaved = tuple(v for m, d in zip(multiples, shape) for v in (m, d))
    dy = ctx.apply("reshape", [ctx.dy], {"shape": interleaved})
    summed = ctx.apply("reduce_sum", [dy], {"axis": list(range(0, 2 * len(shape), 2)), "keepdims": False})
    return [summed]


TILE = OpDef("tile", _tile_infer, kernel=_tile_kernel, grad=_tile_grad,
             doc="x repeated multiples[i] times along each axis i (a short list counts from the last axis)",
             compute=Compute(amp="black"))


# reverse ---------------------------------------------------------------------------------------------
def _reverse_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("reverse needs an input of rank >= 1")
    normalize_axes(attrs.get("axis"), len(x.shape))
    return [x]


def _reverse_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    axes = normalize_axes(ctx.attrs.get("axis"), len(ctx.inputs[0].shape))

    def run(x: Any) -> Any:  # a copy: flip alone would hand out a view of the input
        xp.copyto(out, xp.flip(x, axis=axes))
        return out

    return run


def _reverse_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("reverse", [ctx.dy], {"axis": ctx.attrs.get("axis")})]


REVERSE = OpDef("reverse", _reverse_infer, kernel=_reverse_kernel, grad=_reverse_grad,
                doc="x with the order of its elements reversed along axis (an int or a list)",
                compute=Compute(amp="black"))


# tuple_identity (flow.identity_n) --------------------------------------------------------------------
def _tuple_identity_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs:
        raise ShapeError("identity_n needs at least one input")
    return list(inputs)


def _tuple_identity_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]

    def run(*xs: Any) -> Any:  # copies: a view may alias input 0 only, and there are several inputs
        for out, x in zip(outs, xs):
            xp.copyto(out, x)
        return tuple(outs) if len(outs) > 1 else outs[0]

    return run


def _tuple_identity_grad(ctx: GradContext) -> list[Any]:
    return list(ctx.out_grads)  # an output nobody differentiates leaves its input without gradient


TUPLE_IDENTITY = OpDef("tuple_identity", _tuple_identity_infer, kernel=_tuple_identity_kernel,
                       grad=_tuple_identity_grad, doc="each input unchanged, one output per input (flow.identity_n)",
                       compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="IdentityN"))


# shape_elem_cnt (flow.math.reduced_shape_elem_cnt) ---------------------------------------------------
def counted_axes(axis: Any, rank: int) -> tuple[int, ...]:
    """None: every axis; else a list/tuple of axes (negative ones from the end), as legacy's include_axis_conf."""
    if axis is None:
        return tuple(range(rank))
    if not isinstance(axis, (list, tuple)):
        raise ShapeError(f"reduced_shape_elem_cnt axis must be None, a list or a tuple of ints, got {axis!r}")
    out = set()
    for a in axis:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not -rank <= a < rank:
            raise ShapeError(f"reduced_shape_elem_cnt axis {a!r} is out of range for a rank-{rank} input")
        out.add(int(a) % rank)
    return tuple(sorted(out))


def _elem_cnt_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    counted_axes(attrs.get("axis"), len(x.shape))
    dtype = dtypes.as_dtype(attrs.get("dtype") or np.int32)
    return [BlobSpec((1,), dtype)]


def _elem_cnt_kernel(ctx: KernelContext) -> Any:
    shape = ctx.inputs[0].shape
    count = int(np.prod([shape[a] for a in counted_axes(ctx.attrs.get("axis"), len(shape))]))
    value = ctx.xp.full((1,), count, dtype=ctx.outputs[0].dtype)  # static shapes: known when planned
    return lambda x: value


SHAPE_ELEM_CNT = OpDef("shape_elem_cnt", _elem_cnt_infer, kernel=_elem_cnt_kernel, not_differentiable=True,
                       doc="(1,): the product of the input's extents along axis", compute=Compute(amp="black"))

OPS = (RESHAPE, IDENTITY, AMP_WHITE_IDENTITY, TRANSPOSE, CONCAT, BOUNDED_CONCAT, CONCAT_SPLIT_LIKE, SPLIT, CAST,
       FUSED_CAST_SCALE, BROADCAST_TO_COMPATIBLE_WITH, TILE, REVERSE, TUPLE_IDENTITY, SHAPE_ELEM_CNT)
