"""Dropout: in train jobs y = x * mask with a fresh mask every step, in predict jobs y = x.

The op has two outputs, ``y`` and the scaled mask (0 or 1/(1-rate), shaped like
``noise_shape``), so the gradient ``dy * mask`` uses exactly the mask of the forward pass.
The mask comes from the node's own stream of legacy's CPU generator (``kernels/keep_mask.py``), created
once per plan: the same seed gives the same sequence of masks, legacy's own.

``random_mask_like`` (legacy v0.4 ``flow.nn.random_mask_like``) is an int8 keep mask shaped like its
input: each element is 1 when a uniform draw in [0, 1) exceeds ``rate`` (kept with probability
1 - rate), else 0, as legacy's generator compared ``uniform > rate``. Only the input's shape is read;
a fresh mask is drawn at every step, train or predict job, from the node's own stream of legacy's CPU
generator, so a seed repeats legacy's sequence of masks (and dropout given that seed draws the same ones).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence


from flowjob_core import BlobSpec, Compute, Effects, GradContext, KernelContext, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ops.kernels.keep_mask import keep_mask_source
from flowjob_ops.records.common import broadcast_shape, require_floating


def check_rate(rate: Any, what: str = "dropout rate") -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ShapeError(f"{what} must be a number in [0, 1), got {rate!r}")
    return float(rate)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating(inputs, "dropout")
    check_rate(attrs.get("rate"))
    noise = attrs.get("noise_shape")
    mask_shape = x.shape if noise is None else tuple(noise)
    if noise is not None:
        if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 for d in mask_shape):
            raise ShapeError(f"dropout noise_shape must hold positive ints, got {noise!r}")
        if len(mask_shape) > len(x.shape) or broadcast_shape(x.shape, mask_shape, "dropout noise_shape") != x.shape:
            raise ShapeError(f"dropout noise_shape {mask_shape} must broadcast to the input shape {x.shape}")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"dropout seed must be an int or None, got {seed!r}")
    return [x, BlobSpec(mask_shape, x.dtype)]


def _kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    y = ctx.out(0)
    rate = float(ctx.attrs["rate"])
    mask_spec = ctx.outputs[1]
    if not ctx.training or rate == 0.0:
        # a private constant, not the planned buffer: planned buffers are shared with other values
        ones = xp.ones(mask_spec.shape, dtype=mask_spec.dtype)

        def identity(x: Any) -> tuple[Any, Any]:
            xp.copyto(y, x)
            return y, ones

        return identity
    mask = ctx.out(1)
    draw = keep_mask_source(ctx, mask_spec.shape)  # legacy's CPU stream: a seed gives legacy's masks
    scale = mask_spec.dtype.type(1.0 / (1.0 - rate))

    def run(x: Any) -> tuple[Any, Any]:
        xp.copyto(mask, xp.asarray(draw(rate)))  # kept with probability 1 - rate
        xp.multiply(mask, scale, out=mask)
        xp.multiply(x, mask, out=y)
        return y, mask

    return run


def _grad(ctx: GradContext) -> list[Any]:
    # the mask does not depend on x: a gradient reaching out_1 contributes nothing
    if ctx.out_grads[0] is None:
        return [None]
    return [ctx.apply("multiply", [ctx.out_grads[0], ctx.outputs[1]])]


DROPOUT = OpDef("dropout", _infer, kernel=_kernel, grad=_grad,
                doc="out_0 = x * mask (train) or x (predict); out_1 = the mask, 0 or 1/(1-rate)",
                compute=Compute(amp="gray"), effects=Effects(host_state=True))


# random_mask_like (legacy v0.4 flow.nn.random_mask_like) ---------------------------------------------
def _random_mask_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (like,) = inputs
    check_rate(attrs.get("rate"), "random_mask_like rate")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"random_mask_like seed must be an int or None, got {seed!r}")
    return [BlobSpec(like.shape, dtypes.int8)]


def _random_mask_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    draw = keep_mask_source(ctx, ctx.outputs[0].shape)  # legacy's CPU stream: a seed gives legacy's masks
    rate = float(ctx.attrs["rate"])

    def run(like: Any) -> Any:
        xp.copyto(out, xp.asarray(draw(rate)), casting="unsafe")
        return out

    return run


RANDOM_MASK_LIKE = OpDef("random_mask_like", _random_mask_infer, kernel=_random_mask_kernel, not_differentiable=True,
                         doc="int8 mask like the input: 1 with probability 1 - rate, else 0; fresh every step",
                         compute=Compute(amp="clear"), effects=Effects(host_state=True))

OPS = (DROPOUT, RANDOM_MASK_LIKE)
