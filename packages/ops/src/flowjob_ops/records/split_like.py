"""split_like (legacy's op behind ``flow.user_op_builder("...").Op("split_like")``): ``in`` cut along
``axis`` into pieces as long as each ``like`` blob is on that axis; the other axes stay ``in``'s. Its
gradient joins the pieces' gradients back along the axis (zeros where a piece has none); the ``like``
blobs give only their lengths and take no gradient."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import normalize_axis


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) < 2:
        raise ShapeError("split_like needs the input and at least one like blob")
    x, likes = inputs[0], inputs[1:]
    if not x.shape:
        raise ShapeError("split_like needs an input of rank >= 1")
    axis = normalize_axis(attrs.get("axis", 0), len(x.shape))
    for i, like in enumerate(likes):
        if len(like.shape) <= axis:
            raise ShapeError(f"split_like: like[{i}] of shape {like.shape} has no axis {axis}")
    total = sum(like.shape[axis] for like in likes)
    if total != x.shape[axis]:
        raise ShapeError(f"split_like: the like blobs add up to {total} on axis {axis}, the input {x.shape} "
                         f"has {x.shape[axis]}")
    return [BlobSpec(x.shape[:axis] + (like.shape[axis],) + x.shape[axis + 1:], x.dtype) for like in likes]


def _kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(ctx.inputs[0].shape))
    pairs, start = [], 0
    for i, spec in enumerate(ctx.outputs):
        size = spec.shape[axis]
        pairs.append((ctx.out(i), (slice(None),) * axis + (slice(start, start + size),)))
        start += size

    def run(x: Any, *likes: Any) -> Any:
        for out, part in pairs:
            xp.copyto(out, x[part])
        return tuple(out for out, _ in pairs) if len(pairs) > 1 else pairs[0][0]

    return run


def _grad(ctx: GradContext) -> list[Any]:
    parts = [g if g is not None else ctx.apply("zeros_like", [out]) for g, out in zip(ctx.out_grads, ctx.outputs)]
    joined = parts[0] if len(parts) == 1 else ctx.apply("concat", parts, {"axis": ctx.attrs.get("axis", 0)})
    return [joined] + [None] * (len(ctx.inputs) - 1)


SPLIT_LIKE = OpDef("split_like", _infer, kernel=_kernel, grad=_grad,
                   doc="in cut along axis into pieces as long as each like blob is there", compute=Compute(amp="clear"),
                   legacy=LegacyFace(input_names=("in", "like"), attr_names=("axis",)))

OPS = (SPLIT_LIKE,)
