"""Random draws, fresh at every step from the node's own random stream: random_uniform, random_normal,
bernoulli, coin_flip, batch permutations, and ``decode_random`` (legacy ``flow.data.decode_random``).

decode_random gives a fresh batch of random data at every step: the benchmarks' synthetic-data mode reads
its images and labels from it instead of OFRecord files. The output is ``(batch_size, *shape)`` in
``dtype``; each step fills it from ``initializer`` (any flowjob initializer: legacy's default
``random_uniform_initializer()`` is uniform in [0, 1), ``zeros_initializer`` gives constant labels)
drawing from the node's own host random stream, so an initializer's seed repeats the sequence of
batches and no seed gives fresh entropy. An optional ``tick`` input only orders the node.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ops.records.common import dtype_attr, shape_attr


def _decode_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) > 1:
        raise ShapeError(f"decode_random takes at most one input (tick), got {len(inputs)}")
    shape, batch = attrs.get("shape"), attrs.get("batch_size")
    if not isinstance(shape, tuple) or not all(isinstance(d, numbers.Integral) and d >= 0 for d in shape):
        raise ShapeError(f"decode_random shape must be a tuple of non-negative ints, got {shape!r}")
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise ShapeError(f"decode_random batch_size must be an int >= 1, got {batch!r}")
    if not callable(attrs.get("initializer")):
        raise ShapeError(f"decode_random initializer must be an initializer such as "
                         f"flow.random_uniform_initializer(), got {attrs.get('initializer')!r}")
    return [BlobSpec((int(batch), *(int(d) for d in shape)), np.dtype(attrs["dtype"]))]


def stream(attrs: dict) -> tuple[Any, np.random.Generator]:
    """The initializer drawing from the node's stream, and that stream: an initializer's own seed seeds
    the stream (it would otherwise draw the same batch every step)."""
    init = attrs["initializer"]
    seed = attrs.get("seed")
    own = getattr(init, "seed", None)
    if own is not None and hasattr(init, "with_seed"):
        seed, init = (own if seed is None else seed), init.with_seed(None)
    return init, np.random.default_rng(seed)


def _decode_kernel(ctx: KernelContext) -> Any:
    xp, out, spec = ctx.xp, ctx.out(0), ctx.outputs[0]
    init, rng = stream(ctx.attrs)
    to_device = ctx.backend.from_host

    def run(*tick: Any) -> Any:
        # drawn on the host (initializers are numpy code), then one copy into the output
        xp.copyto(out, to_device(np.asarray(init(spec.shape, spec.dtype, rng), dtype=spec.dtype)))
        return out

    return run


DECODE_RANDOM = OpDef("decode_random", _decode_infer, kernel=_decode_kernel, not_differentiable=True,
                      doc="(batch_size, *shape) values drawn from the initializer, fresh every step",
                      effects=Effects(host_state=True))


# random_uniform, random_normal -----------------------------------------------------------------------
def _random_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dtype = dtype_attr(attrs.get("dtype"))
    if dtype.kind != "f":
        raise ShapeError(f"random values need a floating dtype, got {dtype}")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"seed must be an int or None, got {seed!r}")
    return [BlobSpec(shape_attr(attrs.get("shape", ())), dtype)]


def _random_kernel(kind: str) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        spec = ctx.outputs[0]
        rng = ctx.rng(ctx.attrs.get("seed"))
        # generators fill float32 or float64 only: float16 goes through a float32 buffer
        fill = out if spec.dtype in (np.float32, np.float64) else ctx.scratch(spec.shape, np.float32)
        if kind == "uniform":
            low, high = float(ctx.attrs.get("minval", 0.0)), float(ctx.attrs.get("maxval", 1.0))
            scale, shift = spec.dtype.type(high - low), spec.dtype.type(low)
        else:
            scale, shift = spec.dtype.type(ctx.attrs.get("stddev", 1.0)), spec.dtype.type(ctx.attrs.get("mean", 0.0))

        def run() -> Any:
            if kind == "uniform":
                rng.random(out=fill, dtype=fill.dtype)
            else:
                rng.standard_normal(out=fill, dtype=fill.dtype)
            if fill is not out:
                xp.copyto(out, fill, casting="unsafe")
            xp.multiply(out, scale, out=out)
            return xp.add(out, shift, out=out)

        return run

    return build


RANDOM_UNIFORM = OpDef("random_uniform", _random_infer, kernel=_random_kernel("uniform"), not_differentiable=True,
                       doc="uniform in [minval, maxval), fresh every step", effects=Effects(host_state=True))


RANDOM_NORMAL = OpDef("random_normal", _random_infer, kernel=_random_kernel("normal"), not_differentiable=True,
                      doc="normal(mean, stddev), fresh every step", effects=Effects(host_state=True))


# bernoulli, coin_flip, batch permutations ------------------------------------------------------------
def _check_seed(attrs: dict, op: str) -> None:
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"{op} seed must be an int or None, got {seed!r}")


def _bernoulli_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if x.dtype.kind != "f":
        raise ShapeError(f"bernoulli needs floating probabilities, got {x.dtype}")
    _check_seed(attrs, "bernoulli")
    dtype = dtype_attr(attrs.get("dtype"), x.dtype)
    if dtype.kind not in "biuf":
        raise ShapeError(f"bernoulli dtype must be numeric, got {dtype}")
    return [BlobSpec(x.shape, dtype)]


def _bernoulli_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rng = ctx.rng(ctx.attrs.get("seed"))
    # float64 draws, so a float64 probability is compared at full precision
    uniform = ctx.scratch(ctx.outputs[0].shape, np.float64)
    hit = ctx.scratch(ctx.outputs[0].shape, bool)

    def run(x: Any) -> Any:
        rng.random(out=uniform, dtype=np.float64)
        xp.less(uniform, x, out=hit)  # 1 with probability x
        xp.copyto(out, hit, casting="unsafe")
        return out

    return run


def _coin_flip_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    batch = attrs.get("batch_size")
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise ShapeError(f"coin_flip batch_size must be a positive int, got {batch!r}")
    p = attrs.get("probability", 0.5)
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) <= 1.0:
        raise ShapeError(f"coin_flip probability must be a number in [0, 1], got {p!r}")
    _check_seed(attrs, "coin_flip")
    return [BlobSpec((int(batch),), dtypes.int8)]  # legacy's coin_flip yields int8 0/1


def _coin_flip_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rng = ctx.rng(ctx.attrs.get("seed"))
    uniform = ctx.scratch(ctx.outputs[0].shape, np.float64)
    hit = ctx.scratch(ctx.outputs[0].shape, bool)
    p = float(ctx.attrs.get("probability", 0.5))

    def run() -> Any:
        rng.random(out=uniform, dtype=np.float64)
        xp.less(uniform, p, out=hit)
        xp.copyto(out, hit, casting="unsafe")
        return out

    return run


def _permutation_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("generate_random_batch_permutation_indices needs a value of rank >= 1")
    _check_seed(attrs, "generate_random_batch_permutation_indices")
    return [BlobSpec((x.shape[0],), dtypes.int32)]


def _permutation_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rng = ctx.rng(ctx.attrs.get("seed"))
    # the order of uniform keys: a permutation from draws every backend's generator makes
    keys = ctx.scratch(ctx.outputs[0].shape, np.float64)

    def run(x: Any) -> Any:
        rng.random(out=keys, dtype=np.float64)
        xp.copyto(out, xp.argsort(keys), casting="unsafe")
        return out

    return run


BERNOULLI = OpDef("bernoulli", _bernoulli_infer, kernel=_bernoulli_kernel, not_differentiable=True,
                  doc="1 with probability x, else 0, in dtype (default x's)", compute=Compute(amp="black"),
                  effects=Effects(host_state=True))


COIN_FLIP = OpDef("coin_flip", _coin_flip_infer, kernel=_coin_flip_kernel, not_differentiable=True,
                  doc="(batch_size,) int8: 1 with the given probability, else 0", effects=Effects(host_state=True))


BATCH_PERMUTATION = OpDef("generate_random_batch_permutation_indices", _permutation_infer, kernel=_permutation_kernel,
                          not_differentiable=True,
                          doc="int32 random permutation of range(x.shape[0]), fresh every step",
                          compute=Compute(amp="black"), effects=Effects(host_state=True),
                          legacy=LegacyFace(name_prefix="RandomBatchPermutationIndices"))

OPS = (DECODE_RANDOM, RANDOM_UNIFORM, RANDOM_NORMAL, BERNOULLI, COIN_FLIP, BATCH_PERMUTATION)
