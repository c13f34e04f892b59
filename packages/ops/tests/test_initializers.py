"""Initializers: legacy arguments, distributions, fans, seeds, and use through flow.get_variable."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import initializers
from flowjob_ops.api import _initializers as initializer_values

RNG = np.random.default_rng(0)


def _sample(initializer: initializers.Initializer, shape: tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
    return initializer(shape, np.dtype(dtype), np.random.default_rng(1))


def test_constants() -> None:
    assert np.all(_sample(initializers.constant_initializer(2.5), (3, 2)) == 2.5)
    assert np.all(_sample(initializers.zeros_initializer(), (4,)) == 0)
    ones = _sample(initializers.ones_initializer(), (2, 2), np.int32)
    assert ones.dtype == np.int32 and np.all(ones == 1)


def test_truncated_normal_legacy_argument_orders() -> None:
    # flow.truncated_normal(0.1) is a stddev; truncated_normal_initializer takes the mean first
    values = _sample(initializers.truncated_normal(0.1), (200, 200))
    assert np.abs(values).max() <= 0.2 and 0.08 < values.std() < 0.1
    shifted = _sample(initializers.truncated_normal_initializer(3.0, 0.5), (100, 100))
    assert abs(shifted.mean() - 3.0) < 0.02 and np.abs(shifted - 3.0).max() <= 1.0


def test_random_normal_and_uniform() -> None:
    normal = _sample(initializers.random_normal_initializer(1.0, 2.0), (300, 300))
    assert abs(normal.mean() - 1.0) < 0.05 and abs(normal.std() - 2.0) < 0.05
    uniform = _sample(initializers.random_uniform_initializer(-1, 3), (300, 300), np.float32)
    assert uniform.dtype == np.float32 and -1 <= uniform.min() and uniform.max() < 3
    assert abs(uniform.mean() - 1.0) < 0.05
    integers = _sample(initializers.random_uniform_initializer(0, 5), (1000,), np.int32)
    assert set(np.unique(integers)) == {0, 1, 2, 3, 4}


def test_fans_of_dense_and_conv_weights() -> None:
    assert initializer_values.compute_fans((10, 20)) == (20.0, 10.0)
    assert initializer_values.compute_fans((8, 3, 5, 5), "NCHW") == (75.0, 200.0)
    assert initializer_values.compute_fans((8, 5, 5, 3), "NHWC") == (75.0, 200.0)
    assert initializer_values.compute_fans((8, 5, 5, 3), "channels_last") == (75.0, 200.0)
    assert initializer_values.compute_fans((7,)) == (7.0, 7.0)


@pytest.mark.parametrize("make, std", [
    (lambda: initializers.xavier_uniform_initializer(), math.sqrt(2.0 / (400 + 300))),
    (lambda: initializers.glorot_normal_initializer(), math.sqrt(2.0 / (400 + 300))),
    (lambda: initializers.variance_scaling_initializer(2.0, "fan_in", "truncated_normal"), math.sqrt(2.0 / 400)),
    (lambda: initializers.variance_scaling_initializer(1.0, "fan_out", "random_uniform"), math.sqrt(1.0 / 300)),
    (lambda: initializers.kaiming_initializer(distribution="random_uniform", nonlinearity="relu"),
     math.sqrt(2.0 / 400)),
    (lambda: initializers.kaiming_initializer((300, 100), mode="fan_in", nonlinearity=None), math.sqrt(1.0 / 100)),
])
def test_variance_scaling_family_has_the_documented_spread(make: Any, std: float) -> None:
    values = _sample(make(), (300, 400))
    assert abs(values.std() / std - 1) < 0.03
    assert abs(values.mean()) < 0.05 * std * 10


def test_kaiming_accepts_the_distribution_first_and_rejects_unknown_choices() -> None:
    assert _sample(initializers.kaiming_initializer("random_uniform"), (50, 50)).std() > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        initializers.kaiming_initializer(mode="fan_sum")
    with pytest.raises(ValueError, match="nonlinearity must be"):
        initializers.kaiming_initializer(nonlinearity="swish")
    with pytest.raises(ValueError, match="distribution must be one of"):
        initializers.variance_scaling_initializer(distribution="cauchy")


def test_seeds_make_draws_repeatable() -> None:
    a = initializers.random_normal_initializer(seed=3)((5,), np.float32, np.random.default_rng(1))
    b = initializers.random_normal_initializer(seed=3)((5,), np.float32, np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)
    seeded = initializers.xavier_uniform_initializer().with_seed(9)
    np.testing.assert_array_equal(seeded((4, 4), np.float32, None), seeded((4, 4), np.float32, None))
    assert seeded.seed == 9 and initializers.xavier_uniform_initializer().seed is None


def test_get_variable_uses_the_initializer_and_random_seed() -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        a = fc.get_variable("a", shape=(3, 3), initializer=initializers.random_normal_initializer(), random_seed=4)
        b = fc.get_variable("b", shape=(3, 3), initializer=initializers.random_normal_initializer(), random_seed=4)
        return a - b

    np.testing.assert_array_equal(job(np.zeros(1, np.float32)), np.zeros((3, 3)))
