"""``flow.experimental.ssp_variable_proxy`` as legacy's op tests use it: ``value`` is the variable as it was
``buffer_size`` steps ago (its initial value for the first ``buffer_size`` steps) while ``ref`` takes the
step's assignment, whether computed from the stale value or from the current one."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError


def _job(buffer_size: int, from_stale: bool):
    flow.clear_default_session()

    @flow.global_function()
    def step() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.constant_initializer(0))
        ref, value = flow.experimental.ssp_variable_proxy(w, buffer_size=buffer_size)
        flow.assign(ref, (value if from_stale else ref) + flow.constant_like(w, 1.0))
        return value

    return step


@pytest.mark.parametrize("size", [1, 4])
def test_ring_buffer_of_the_stale_value(size):
    """W = W_stale + 1: the value climbs by one every ``size`` steps."""
    step = _job(size, from_stale=True)
    got = [float(step()[0]) for _ in range(3 * size)]
    assert got == [float(i // size) for i in range(3 * size)]


def test_ring_buffer_of_the_current_value():
    """W = W + 1: after the first four steps the value lags the variable by four steps."""
    step = _job(4, from_stale=False)
    assert [float(step()[0]) for _ in range(8)] == [0, 0, 0, 0, 1, 2, 3, 4]


def test_only_a_variable_and_a_positive_size():
    flow.clear_default_session()

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        with pytest.raises(OpBuildError, match="var must be a variable of this job"):
            flow.experimental.ssp_variable_proxy(x)
        w = flow.get_variable("w", shape=(3,), initializer=flow.constant_initializer(0))
        with pytest.raises(OpBuildError, match="buffer_size must be an int >= 1, got 0"):
            flow.experimental.ssp_variable_proxy(w, buffer_size=0)
        return x

    bad(np.zeros(3, np.float32))
