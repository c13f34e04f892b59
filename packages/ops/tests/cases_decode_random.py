"""Op cases of ``decode_random`` (legacy ``flow.data.decode_random``). op_cases.py appends ``CASES``.

The reference draws from the stream the kernel uses: ``np.random.default_rng`` seeded with the
initializer's seed, the initializer itself then drawing from that stream. Fresh batches at every step,
the default initializer and int labels are tested through jobs in ``tests/test_decode_random.py``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from hypothesis import strategies as st

from flowjob_ops.api import initializers as inits

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _case(draw: Draw) -> Case:
    seed = draw(st.integers(0, 1000))
    init = draw(st.sampled_from([inits.random_uniform_initializer(-2.0, 3.0), inits.random_normal_initializer(1.0, 0.5),
                                 inits.constant_initializer(0.25), inits.random_uniform_initializer(0, 10)]))
    dtype = draw(st.sampled_from([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)]))
    attrs = {"shape": tuple(draw(fst.small_shapes(0, 3, 4))), "dtype": dtype,
             "batch_size": draw(st.integers(1, 3)), "initializer": init.with_seed(seed)}
    return [], attrs


def _reference(shape: tuple[int, ...], dtype: Any, batch_size: int, initializer: Any) -> np.ndarray:
    rng = np.random.default_rng(initializer.seed)
    return initializer.with_seed(None)((batch_size, *shape), dtype, rng)


CASES = [OpCase("decode_random", _case, _reference, wrt=())]
