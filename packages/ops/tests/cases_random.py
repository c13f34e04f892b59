"""Op cases of legacy ``flow.random``: bernoulli, coin_flip, generate_random_batch_permutation_indices.
op_cases.py appends ``CASES`` to its table.

The references draw from the stream the numpy backend gives a seeded node
(``numpy.random.default_rng(seed)``), float64 uniforms as the kernels do.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _shape(draw: Draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 5) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, max_dims, max_side)))


def bernoulli_case(draw: Draw) -> Case:
    shape = _shape(draw, 0)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    p = draw(fst.arrays(shape, st.floats(0.0, 1.0, allow_subnormal=False))).astype(dtype)
    out = draw(st.sampled_from([None, np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.float32)]))
    return [p], {"seed": draw(st.integers(0, 1000)), "dtype": out}


def bernoulli_ref(p: np.ndarray, seed: int, dtype: Any) -> np.ndarray:
    u = np.random.default_rng(seed).random(p.shape, dtype=np.float64)
    return (u < p).astype(dtype or p.dtype)


def coin_flip_case(draw: Draw) -> Case:
    return [], {"batch_size": draw(st.integers(1, 9)), "seed": draw(st.integers(0, 1000)),
                "probability": draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))}


def coin_flip_ref(batch_size: int, seed: int, probability: float) -> np.ndarray:
    u = np.random.default_rng(seed).random((batch_size,), dtype=np.float64)
    return (u < probability).astype(np.int8)


def permutation_case(draw: Draw) -> Case:
    x = np.zeros(_shape(draw, 1), dtype=draw(st.sampled_from([np.float32, np.int32])))
    return [x], {"seed": draw(st.integers(0, 1000))}


def permutation_ref(x: np.ndarray, seed: int) -> np.ndarray:
    keys = np.random.default_rng(seed).random((x.shape[0],), dtype=np.float64)
    return np.argsort(keys).astype(np.int32)


CASES = [
    OpCase("bernoulli", bernoulli_case, reference=bernoulli_ref, wrt=()),
    OpCase("coin_flip", coin_flip_case, reference=coin_flip_ref, wrt=()),
    OpCase("generate_random_batch_permutation_indices", permutation_case, reference=permutation_ref, wrt=()),
]
