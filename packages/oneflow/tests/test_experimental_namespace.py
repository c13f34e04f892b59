"""``oneflow.experimental`` as v0.4 programs used it: ``import oneflow.experimental as flow`` reaches every
top-level name besides its own (``flow.nn.Module``, ``flow.unittest``), and ``oneflow.python.nn.parameter``
is legacy's path of ``flow.nn.Parameter``."""
import pytest

import oneflow
import oneflow.experimental as experimental


def test_experimental_falls_back_to_the_top_level_names():
    assert experimental.nn.Module is oneflow.nn.Module and experimental.unittest is oneflow.unittest
    assert experimental.Tensor is oneflow.Tensor and experimental.global_function is oneflow.global_function
    # its own names stay its own
    assert experimental.square_sum.__module__ == "flowjob_ops.api.square_sum"


def test_unknown_and_private_names_stay_errors():
    with pytest.raises(AttributeError):
        experimental._private  # noqa: B018 - the attribute read is the test
    with pytest.raises(AttributeError, match="no_such_name"):
        experimental.no_such_name  # noqa: B018


def test_legacy_parameter_path():
    from oneflow.python.nn.parameter import Parameter

    assert Parameter is oneflow.nn.Parameter
