"""Modules legacy programs and OneFlow's own tests import by path: ``oneflow_api`` (v0.3's binding module)
and the helpers under ``oneflow.python``."""
import itertools

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
import oneflow_api
from flowjob_core import Blob, FlowjobError
from oneflow.python.framework import distribute as legacy_distribute
from oneflow.python.ops.transpose_util import get_inversed_perm, get_perm_when_transpose_axis_to_last_dim, is_perm


def test_transpose_util_moves_an_axis_last_and_back():
    assert get_perm_when_transpose_axis_to_last_dim(4, 1) == (0, 2, 3, 1)
    assert get_perm_when_transpose_axis_to_last_dim(3, -1) == (0, 1, 2)
    x = np.arange(24).reshape(2, 3, 4)
    for axis in range(-3, 3):
        perm = get_perm_when_transpose_axis_to_last_dim(3, axis)
        moved = np.transpose(x, perm)
        assert moved.shape[-1] == x.shape[axis]
        np.testing.assert_array_equal(np.transpose(moved, get_inversed_perm(perm)), x)
    assert all(is_perm(p) for p in itertools.permutations(range(3))) and not is_perm((0, 0, 1))
    with pytest.raises(ValueError, match="not a permutation"):
        get_inversed_perm((1, 1))
    with pytest.raises(ValueError, match="out of range"):
        get_perm_when_transpose_axis_to_last_dim(2, 2)


def test_oneflow_api_names():
    assert oneflow_api.BlobDesc is Blob
    assert oneflow_api.distribute.split(1) == flow.distribute.split(1) == legacy_distribute.split(1)
    assert isinstance(flow.distribute.broadcast(), oneflow_api.distribute.BroadcastDistribute)
    assert oneflow_api.CurrentMachineId() == 0 and oneflow_api.EagerExecutionEnabled() is False
    assert legacy_distribute.MirroredStrategyEnabled() is False
    with pytest.raises(FlowjobError, match="no job is being traced"):
        oneflow_api.JobBuildAndInferCtx_GetCurrentJobName()

    flow.clear_default_session()
    seen = []

    @flow.global_function()
    def named(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        seen.append((oneflow_api.JobBuildAndInferCtx_GetCurrentJobName(), isinstance(x, oneflow_api.BlobDesc)))
        return x

    named(np.zeros(2, np.float32))
    assert seen == [("named", True)]
    flow.clear_default_session()
