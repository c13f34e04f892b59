"""``random_mask_like`` (legacy v0.4 ``flow.nn.random_mask_like``): an int8 keep mask shaped like its input.

Each element is 1 when a uniform draw in [0, 1) exceeds ``rate`` (kept with probability 1 - rate),
else 0: legacy's generator compared ``uniform > rate`` and wrote int8. Only the input's shape is
read; a fresh mask is drawn at every step, train or predict job, from the node's own random stream
(``ctx.rng(seed)``), so a seed repeats the sequence of masks.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, KernelContext, OpDef, ShapeError, dtypes


def check_rate(rate: Any, what: str = "random_mask_like rate") -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ShapeError(f"{what} must be a number in [0, 1), got {rate!r}")
    return float(rate)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (like,) = inputs
    check_rate(attrs.get("rate"))
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"random_mask_like seed must be an int or None, got {seed!r}")
    return [BlobSpec(like.shape, dtypes.int8)]


def _kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rng = ctx.rng(ctx.attrs.get("seed"))
    # float32 draws compared with a float32 rate, as legacy's float uniform_real_distribution
    uniform = ctx.scratch(ctx.outputs[0].shape, np.float32)
    keep = ctx.scratch(ctx.outputs[0].shape, bool)
    rate = np.float32(ctx.attrs["rate"])

    def run(like: Any) -> Any:
        rng.random(out=uniform, dtype=np.float32)
        xp.greater(uniform, rate, out=keep)
        xp.copyto(out, keep, casting="unsafe")
        return out

    return run


RANDOM_MASK_LIKE = OpDef("random_mask_like", _infer, kernel=_kernel, not_differentiable=True,
                         name_prefix="RandomMaskLike",
                         doc="int8 mask like the input: 1 with probability 1 - rate, else 0; fresh every step")

OPS = (RANDOM_MASK_LIKE,)
