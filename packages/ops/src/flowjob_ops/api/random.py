"""``flow.random`` as legacy v0.4 named it: bernoulli, coin_flip (alias CoinFlip),
generate_random_batch_permutation_indices, shuffle and gen_seed.

Every random node owns its stream (``ctx.rng(seed)``, made once per plan): a seed gives the same
sequence of draws step after step, no seed gives fresh entropy.
"""
from __future__ import annotations

import numbers
import random as _py_random
import sys
from typing import Any

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import build_error, op_name


__all__ = ["CoinFlip", "bernoulli", "coin_flip", "gen_seed", "generate_random_batch_permutation_indices", "shuffle"]


def _seed(seed: Any, what: str) -> int | None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise build_error(what, f"seed must be an int or None, got {seed!r}")
    return None if seed is None else int(seed)


def bernoulli(x: Blob, seed: int | None = None, dtype: Any = None, name: str | None = None) -> Blob:
    """0/1 draws, 1 with probability ``x`` (elementwise), fresh every step.

    Args:
        x: a floating blob of probabilities in [0, 1].
        seed: seeds this node's random stream (default: fresh entropy).
        dtype: the output dtype; default x's.
        name: the op name; default ``Bernoulli_<n>``.

    Returns:
        A blob of x's shape; not differentiable.
    """
    attrs = {"seed": _seed(seed, "flow.random.bernoulli"), "dtype": None if dtype is None else dtypes.as_dtype(dtype)}
    return apply("bernoulli", [x], attrs, name=name)


def coin_flip(batch_size: int = 1, seed: int | None = None, probability: float = 0.5,
              name: str | None = None) -> Blob:
    """``batch_size`` int8 coin flips, 1 with ``probability``, fresh every step.

    Args:
        batch_size: the number of flips.
        seed: seeds this node's random stream (default: fresh entropy).
        probability: the chance of a 1, in [0, 1].
        name: the op name; default ``CoinFlip_<n>``.

    Returns:
        An int8 blob (batch_size,).
    """
    attrs = {"batch_size": batch_size, "seed": _seed(seed, "flow.random.coin_flip"), "probability": probability}
    return apply("coin_flip", [], attrs, name=name)


CoinFlip = coin_flip  # legacy exported both spellings


def generate_random_batch_permutation_indices(value: Blob, seed: int | None = None, name: str | None = None) -> Blob:
    """A random permutation of ``range(value.shape[0])``, fresh every step.

    Args:
        value: a blob of rank >= 1 (only its first axis's length is read).
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``<value's op>_random_batch_permutation_indices`` as legacy.

    Returns:
        An int32 blob (value.shape[0],).
    """
    what = "flow.random.generate_random_batch_permutation_indices"
    if not isinstance(value, Blob):
        raise build_error(what, f"value must be a blob, got {type(value).__name__}")
    seed = _seed(seed, what)
    if name is None:
        name = op_name(None, f"{value.op_name}_random_batch_permutation_indices")
    return apply("generate_random_batch_permutation_indices", [value], {"seed": seed}, name=name)


def shuffle(value: Blob, seed: int | None = None, name: str | None = None) -> Blob:
    """``value`` with its first axis in a random order (one permutation per step).

    Args:
        value: a blob of rank >= 1.
        seed: seeds the permutation's random stream (default: fresh entropy).
        name: the gather's name; default ``Shuffle_<n>``.

    Returns:
        A blob like value; the gradient flows back through the gather.
    """
    node = op_name(name, "Shuffle")
    indices = generate_random_batch_permutation_indices(value, seed, name=f"{node}_permutation")
    return apply("gather", [value, indices], {"axis": 0}, name=node)


def gen_seed(seed: int | None = None) -> tuple[int, bool]:
    """Legacy's seed helper (consistent view): ``(seed, True)``, a random seed when none is given."""
    if seed is None:
        seed = _py_random.randint(-sys.maxsize, sys.maxsize)
    return int(_seed(seed, "flow.random.gen_seed")), True  # type: ignore[arg-type]
