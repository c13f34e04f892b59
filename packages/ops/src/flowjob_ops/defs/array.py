"""Shape and layout ops: reshape, identity, transpose, concat, split, cast.

reshape and identity are views (``view=True``): their kernels return the input itself or a
view of it, and the planner keeps the input's buffer alive as long as the view is read.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError, dtypes

from flowjob_ops.defs.common import normalize_axis, same_as_first, same_dtype


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


RESHAPE = OpDef("reshape", _reshape_infer, kernel=_reshape_kernel, grad=_reshape_grad, name_prefix="Reshape",
                view=True, doc="the same elements in a new shape (one -1 is inferred); a view")
IDENTITY = OpDef("identity", same_as_first, kernel=_identity_kernel, grad=_identity_grad, name_prefix="Identity",
                 view=True, doc="x itself")


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
                  name_prefix="Transpose", doc="axes permuted by perm (default: reversed)")


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


CONCAT = OpDef("concat", _concat_infer, kernel=_concat_kernel, grad=_concat_grad, name_prefix="Concat",
               doc="inputs joined along axis")
SPLIT = OpDef("split", _split_infer, kernel=_split_kernel, grad=_split_grad, name_prefix="Split",
              doc="the input cut along axis into pieces of the given sizes (one output each)")


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
    x, y = ctx.inputs[0], ctx.outputs[0]
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        return [None]  # integers carry no gradient
    return [ctx.apply("cast", [ctx.dy], {"dtype": x.dtype})]


CAST = OpDef("cast", _cast_infer, kernel=_cast_kernel, grad=_cast_grad, name_prefix="Cast",
             doc="x converted to dtype; differentiable between floating dtypes only")

OPS = (RESHAPE, IDENTITY, TRANSPOSE, CONCAT, SPLIT, CAST)
