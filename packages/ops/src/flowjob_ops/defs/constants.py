"""Ops whose values do not depend on their inputs' values: constants, *_like fills, random numbers.

Constant kernels build their array once and return it every step: kernels never write
their inputs, so nobody can change it (returned values are copied out of the step).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError, dtypes


def _dtype(value: Any, default: np.dtype = dtypes.float32) -> np.dtype:
    try:
        return dtypes.as_dtype(value) if value is not None else default
    except TypeError as exc:
        raise ShapeError(str(exc)) from None


def _shape(value: Any) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, numbers.Integral) else tuple(value)
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in dims):
        raise ShapeError(f"shape must hold non-negative ints, got {value!r}")
    return tuple(int(d) for d in dims)


def _zero_grad(ctx: GradContext) -> list[Any]:
    """The output does not change with the input's values: no gradient flows back."""
    return [None] * len(ctx.inputs)


# constant -----------------------------------------------------------------------
def _constant_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    value = np.asarray(attrs.get("value"))
    if value.dtype.kind not in "biuf":
        raise ShapeError(f"constant value must be a number or an array of numbers, got {attrs.get('value')!r}")
    shape = _shape(attrs["shape"]) if attrs.get("shape") is not None else value.shape
    try:
        np.broadcast_to(value, shape)
    except ValueError:
        raise ShapeError(f"constant value of shape {value.shape} does not broadcast to shape {shape}") from None
    return [BlobSpec(shape, _dtype(attrs.get("dtype")))]


def _constant_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    host = np.broadcast_to(np.asarray(ctx.attrs["value"]).astype(spec.dtype), spec.shape)
    value = ctx.xp.array(host, copy=True)
    return lambda: value


CONSTANT = OpDef("constant", _constant_infer, kernel=_constant_kernel, not_differentiable=True,
                 name_prefix="Constant", doc="a fixed array: value broadcast to shape, in dtype (default float32)")


# fills shaped like an input -----------------------------------------------------
def _like_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (like,) = inputs
    value = attrs.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise ShapeError(f"the fill value must be a number, got {value!r}")
    return [BlobSpec(like.shape, _dtype(attrs.get("dtype"), like.dtype))]


def _like_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    value = ctx.xp.full(spec.shape, ctx.attrs.get("value", 0), dtype=spec.dtype)
    return lambda like: value


ZEROS_LIKE = OpDef("zeros_like", _like_infer, kernel=_like_kernel, grad=_zero_grad, name_prefix="ZerosLike",
                   doc="zeros of the input's shape and dtype")
CONSTANT_LIKE = OpDef("constant_like", _like_infer, kernel=_like_kernel, grad=_zero_grad,
                      name_prefix="ConstantLike", doc="value in the input's shape (and its dtype unless given)")


# random -------------------------------------------------------------------------
def _random_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dtype = _dtype(attrs.get("dtype"))
    if dtype.kind != "f":
        raise ShapeError(f"random values need a floating dtype, got {dtype}")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"seed must be an int or None, got {seed!r}")
    return [BlobSpec(_shape(attrs.get("shape", ())), dtype)]


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
                       name_prefix="RandomUniform", doc="uniform in [minval, maxval), fresh every step")
RANDOM_NORMAL = OpDef("random_normal", _random_infer, kernel=_random_kernel("normal"), not_differentiable=True,
                      name_prefix="RandomNormal", doc="normal(mean, stddev), fresh every step")


# legacy flow.random: bernoulli, coin_flip, batch permutation ------------------------
def _check_seed(attrs: dict, op: str) -> None:
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"{op} seed must be an int or None, got {seed!r}")


def _bernoulli_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if x.dtype.kind != "f":
        raise ShapeError(f"bernoulli needs floating probabilities, got {x.dtype}")
    _check_seed(attrs, "bernoulli")
    dtype = _dtype(attrs.get("dtype"), x.dtype)
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
                  name_prefix="Bernoulli", doc="1 with probability x, else 0, in dtype (default x's)")
COIN_FLIP = OpDef("coin_flip", _coin_flip_infer, kernel=_coin_flip_kernel, not_differentiable=True,
                  name_prefix="CoinFlip", doc="(batch_size,) int8: 1 with the given probability, else 0")
BATCH_PERMUTATION = OpDef("generate_random_batch_permutation_indices", _permutation_infer,
                          kernel=_permutation_kernel, not_differentiable=True,
                          name_prefix="RandomBatchPermutationIndices",
                          doc="int32 random permutation of range(x.shape[0]), fresh every step")

OPS = (CONSTANT, ZEROS_LIKE, CONSTANT_LIKE, RANDOM_UNIFORM, RANDOM_NORMAL, BERNOULLI, COIN_FLIP, BATCH_PERMUTATION)
