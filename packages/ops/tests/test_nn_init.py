"""flow.nn.init: legacy v0.4's in-place initializers on session variables, arrays and tensor-like objects."""
from __future__ import annotations

import math

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.api.model_io import get_all_variables
from flowjob_ops.api import nn_init
from flowjob_ops.api.initializers import zeros_initializer


@pytest.fixture
def weight():
    fc.clear_default_session()

    @fc.global_function()
    def job() -> tp.Numpy:
        return fc.get_variable("w", shape=(256, 64), initializer=zeros_initializer())

    job()
    yield get_all_variables()["w"], job
    fc.clear_default_session()


def test_a_session_variable_gets_a_fresh_draw_that_the_next_step_reads(weight):
    w, job = weight
    assert nn_init.kaiming_uniform_(w, nonlinearity="relu") is w
    bound = math.sqrt(3.0) * math.sqrt(2.0) / math.sqrt(64)
    value = job()
    assert np.abs(value).max() <= bound and np.abs(value).max() > 0.9 * bound
    nn_init.xavier_normal_(w)
    assert abs(job().std() - math.sqrt(2.0 / (256 + 64))) < 0.01
    nn_init.constant_(w, 0.5)
    np.testing.assert_array_equal(job(), np.full((256, 64), 0.5, np.float32))
    nn_init.uniform_(w, -0.1, 0.1)
    assert -0.1 <= job().min() and job().max() < 0.1


def test_arrays_fill_in_place_and_tensors_use_their_own_method():
    a = np.zeros((3, 4), np.float32)
    nn_init.ones_(a)
    np.testing.assert_array_equal(a, np.ones((3, 4)))
    nn_init.normal_(a, mean=10.0, std=0.001)
    assert abs(a.mean() - 10.0) < 0.01

    class Tensor:
        def __init__(self) -> None:
            self.calls: list = []

        def fill_(self, value):
            self.calls.append(("fill_", value))
            return self

        def xavier_uniform_(self, gain, data_format):
            self.calls.append(("xavier_uniform_", gain, data_format))
            return self

    t = Tensor()
    nn_init.zeros_(t)
    nn_init.xavier_uniform_(t, data_format="NHWC")
    assert t.calls == [("fill_", 0), ("xavier_uniform_", 1.0, "NHWC")]


def test_calculate_gain_is_legacys_table():
    assert nn_init.calculate_gain("conv2d") == 1.0 and nn_init.calculate_gain("sigmoid") == 1.0
    assert nn_init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert nn_init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn_init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert nn_init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'"):
        nn_init.calculate_gain("gelu")


def test_a_blob_being_traced_points_to_get_variable():
    fc.clear_default_session()

    @fc.global_function()
    def job() -> tp.Numpy:
        w = fc.get_variable("w", shape=(2,), initializer=zeros_initializer())
        nn_init.ones_(w)
        return w

    with pytest.raises(fc.FlowjobError, match=r"nn.init.ones_: 'w/out' is a blob of a job being traced.*get_variable"):
        job()
    with pytest.raises(ValueError, match="only gain == 1.0"):
        nn_init.xavier_uniform_(np.zeros((2, 2)), gain=2.0)
    fc.clear_default_session()
