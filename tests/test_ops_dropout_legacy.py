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

_helpers = sibling(__file__, "op_surface_helpers")
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


@pytest.fixture
def on_the_cpu(monkeypatch):
    """Legacy's CPU masks are the CPU backend's: the gpu backend draws dropout's on the device (flowjob-gpu)."""
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")
    flow.clear_default_session()


def test_a_seeded_dropout_draws_legacys_cpu_masks_step_after_step(on_the_cpu):
    # legacy's CPU kernels: std::mt19937(12345), float uniforms > rate; OneFlow's test_dropout_module literals
    @flow.global_function(type="train")
    def train() -> tp.Numpy:
        x = flow.get_variable("x", shape=(2, 2, 2, 2), initializer=flow.ones_initializer())
        out = flow.nn.dropout(x, rate=0.75, seed=12345, name="dropout")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), momentum=0).minimize(
            flow.math.square(out))
        return out

    first, second = train().flatten(), train().flatten()
    np.testing.assert_array_equal(first, [4, 4, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 4, 0, 0, 4])
    np.testing.assert_array_equal(second, [0, 0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0])


def test_dropout_and_random_mask_like_with_one_seed_draw_one_mask(on_the_cpu):
    @flow.global_function(type="train")
    def train() -> tuple[tp.Numpy, tp.Numpy]:
        x = flow.get_variable("x", shape=(6, 7), initializer=flow.ones_initializer(), dtype=flow.double)
        out = flow.nn.dropout(x, rate=0.5, seed=3)
        mask = flow.nn.random_mask_like(x, rate=0.5, seed=3)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), momentum=0).minimize(out)
        return out, mask

    out, mask = train()
    np.testing.assert_array_equal(out, mask.astype(np.float64) * 2.0)
    assert 0 < mask.sum() < mask.size
