"""flow.nn.random_mask_like (legacy v0.4's keep mask) against numpy: int8, fresh each step, seeded
sequences, and its argument checks."""
from __future__ import annotations


import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(11)

_helpers = sibling(__file__, "legacy_helpers")
fresh_session = _helpers.fresh_session


def test_random_mask_like_int8_fresh_each_step_and_seeded():
    like = np.zeros((64, 64), np.float32)

    def make(seed):
        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((64, 64))) -> tp.Numpy:
            m = flow.nn.random_mask_like(x, 0.25, seed=seed)
            assert (m.shape, m.dtype, m.op_name.startswith("RandomMaskLike_")) == ((64, 64), np.int8, True)
            return m

        return job

    first, second = make(3), make(3)
    a, b = first(like), first(like)
    assert a.dtype == np.int8 and set(np.unique(a)) <= {0, 1}
    assert abs(a.mean() - 0.75) < 0.03  # kept with probability 1 - rate
    assert not np.array_equal(a, b)  # a new mask every step
    np.testing.assert_array_equal(second(like), a)  # the same seed repeats the sequence


@pytest.mark.parametrize("kwargs, match", [
    ({"rate": 1.0}, "rate must be a number in"),
    ({"rate": -0.1}, "rate must be a number in"),
    ({"rate": 0.5, "noise_shape": [2, 1]}, "noise_shape must be None"),
])
def test_random_mask_like_rejects_bad_arguments(kwargs, match):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.random_mask_like(x, **kwargs)

    with pytest.raises(FlowjobError, match=f"random_mask_like at .*: {match}"):
        job(np.zeros((2, 3), np.float32))
