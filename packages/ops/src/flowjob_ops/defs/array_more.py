"""More layout ops of the legacy surface: pad, tile, reverse, tuple_identity.

Their gradients are graph nodes of existing ops: pad -> slice, tile -> reshape + reduce_sum,
reverse -> reverse, tuple_identity -> its output gradients.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import check_scalar, normalize_axes, typed_scalar


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    try:
        items = tuple(value)
    except TypeError:
        raise ShapeError(f"{what} must be a sequence of ints, got {value!r}") from None
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in items):
        raise ShapeError(f"{what} must be a sequence of ints, got {value!r}")
    return tuple(int(v) for v in items)


# pad ------------------------------------------------------------------------------
def _pad_widths(attrs: dict, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    before = _int_list(attrs.get("padding_before"), "pad padding_before")
    after = _int_list(attrs.get("padding_after"), "pad padding_after")
    if len(before) != rank or len(after) != rank:
        raise ShapeError(f"pad paddings need one (before, after) pair per axis of the rank-{rank} input, got "
                         f"before={before}, after={after}")
    if any(p < 0 for p in before + after):
        raise ShapeError(f"pad paddings must be >= 0, got before={before}, after={after}")
    return before, after


def _pad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    before, after = _pad_widths(attrs, len(x.shape))
    check_scalar(attrs.get("constant_value", 0), x.dtype, "pad constant_value")
    return [BlobSpec(tuple(d + b + a for d, b, a in zip(x.shape, before, after)), x.dtype)]


def _pad_kernel(ctx: KernelContext) -> Any:
    out = ctx.out(0)
    x = ctx.inputs[0]
    before, _ = _pad_widths(ctx.attrs, len(x.shape))
    inner = tuple(slice(b, b + d) for b, d in zip(before, x.shape))
    fill = typed_scalar(ctx.attrs.get("constant_value", 0), x.dtype)

    def run(value: Any) -> Any:
        out.fill(fill)
        out[inner] = value
        return out

    return run


def _pad_grad(ctx: GradContext) -> list[Any]:
    x = ctx.inputs[0]
    before, _ = _pad_widths(ctx.attrs, len(x.shape))
    return [ctx.apply("slice", [ctx.dy], {"begin": before, "size": x.shape})]


PAD = OpDef("pad", _pad_infer, kernel=_pad_kernel, grad=_pad_grad, name_prefix="Pad",
            doc="x surrounded by constant_value: padding_before / padding_after elements per axis")


# tile -------------------------------------------------------------------------------
def _tile_multiples(attrs: dict, rank: int) -> tuple[int, ...]:
    """One multiple per axis; a shorter list applies to the trailing axes (numpy's rule)."""
    multiples = _int_list(attrs.get("multiples"), "tile multiples")
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


TILE = OpDef("tile", _tile_infer, kernel=_tile_kernel, grad=_tile_grad, name_prefix="Tile",
             doc="x repeated multiples[i] times along each axis i (a short list counts from the last axis)")


# reverse ------------------------------------------------------------------------------
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


REVERSE = OpDef("reverse", _reverse_infer, kernel=_reverse_kernel, grad=_reverse_grad, name_prefix="Reverse",
                doc="x with the order of its elements reversed along axis (an int or a list)")


# tuple_identity (flow.identity_n) ------------------------------------------------------
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
                       grad=_tuple_identity_grad, name_prefix="IdentityN",
                       doc="each input unchanged, one output per input (flow.identity_n)")

OPS = (PAD, TILE, REVERSE, TUPLE_IDENTITY)
