"""Legacy ``flow.user_op_module_builder`` and ``flow.find_or_create_module``: an op declared once in a
``flow.deprecated.nn.Module`` and added per call (names from the call count, inside a namespace), the job's
modules shared by name with ``reuse=True``, and the errors a wrong use gets."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as oft
from flowjob_core import OpBuildError


class Add(flow.deprecated.nn.Module):
    made = 0

    def __init__(self, builder=flow.consistent_user_op_module_builder):
        flow.deprecated.nn.Module.__init__(self)
        Add.made += 1
        self.module_builder_ = builder("add_n")
        self.module_builder_.InputSize("in", 2).Output("out")
        self.module_builder_.user_op_module.InitOpKernel()

    def forward(self, x, y):
        return (self.module_builder_.OpName(f"Add_{self.call_seq_no}").Input("in", [x, y]).Build()
                .InferAndTryRun().RemoteBlobList()[0])


def test_a_module_adds_one_named_node_per_call():
    flow.clear_default_session()
    names = []

    @flow.global_function()
    def job(x: oft.Numpy.Placeholder((2, 5)), y: oft.Numpy.Placeholder((2, 5))) -> oft.Numpy:
        with flow.scope.namespace("AddJob"):
            adder = flow.find_or_create_module("Add", lambda: Add(flow.user_op_module_builder))
            z = adder(x, y)
            names.append(z.op_name)
            v = adder(z, x)
            names.append(v.op_name)
        return v

    rng = np.random.default_rng(0)
    x, y = rng.random((2, 5), np.float32), rng.random((2, 5), np.float32)
    np.testing.assert_allclose(job(x, y), 2 * x + y, rtol=1e-6)
    assert names == ["AddJob-Add_0", "AddJob-Add_1"]


def test_reuse_shares_the_module_and_a_second_make_is_refused():
    flow.clear_default_session()
    Add.made = 0

    @flow.global_function()
    def shared(xs: Tuple[(oft.Numpy.Placeholder((5, 2)),) * 2]) -> oft.Numpy:
        first = flow.find_or_create_module("Add", Add, reuse=True)
        assert flow.find_or_create_module("Add", Add, reuse=True) is first
        x = first(*xs)
        return first(x, x)

    xs = (np.ones((5, 2), np.float32), np.full((5, 2), 2.0, np.float32))
    np.testing.assert_allclose(shared(xs), np.full((5, 2), 6.0))
    assert Add.made == 1

    @flow.global_function()
    def twice(x: oft.Numpy.Placeholder((5, 2))) -> oft.Numpy:
        flow.find_or_create_module("Add", Add)
        flow.find_or_create_module("Add", Add)
        return x

    with pytest.raises(OpBuildError, match="module 'Add' was already made in this job .*reuse=True"):
        twice(xs[0])


def test_wrong_module_builder_uses_name_the_op():
    flow.clear_default_session()

    @flow.global_function()
    def job(x: oft.Numpy.Placeholder((5, 2))) -> oft.Numpy:
        builder = flow.user_op_module_builder("add_n").InputSize("in", 2)
        with pytest.raises(OpBuildError, match=r"user_op_module_builder\('add_n'\): call OpName"):
            builder.Input("in", [x, x]).Build()
        with pytest.raises(OpBuildError, match="declared with InputSize 2, got 1"):
            builder.OpName("a").Input("in", [x])
        with pytest.raises(OpBuildError, match="create\\(\\) must return a flow.deprecated.nn.Module"):
            flow.find_or_create_module("m", lambda: object())
        return x

    job(np.zeros((5, 2), np.float32))
