"""The minimal distribution (core, ops, typing and the face only): predict jobs run, and missing
parts explain themselves."""
import importlib.util

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import MissingPackageError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_this_environment_is_minimal():
    for module in ("flowjob_watch", "flowjob_optim", "flowjob_data"):
        assert importlib.util.find_spec(module) is None, f"{module} should not be installed here"


def test_a_predict_job_runs():
    @flow.global_function(type="predict")
    def relu_job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.relu(x)

    x = np.array([[-1, 0, 1], [2, -2, 3]], np.float32)
    np.testing.assert_array_equal(relu_job(x), np.maximum(x, 0))


def test_watch_without_the_watch_package_names_the_distribution():
    with pytest.raises(MissingPackageError,
                       match=r"flow\.watch needs the flowjob-watch distribution.*pip install flowjob-watch"):
        @flow.global_function()
        def watching(x: tp.Numpy.Placeholder((3,))) -> None:
            flow.watch(flow.nn.relu(x), print)

        watching(np.zeros(3, np.float32))
    # the session still answers
    @flow.global_function()
    def fine(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.nn.relu(x)

    np.testing.assert_array_equal(fine(np.ones(3, np.float32)), np.ones(3))


def test_optimizer_and_data_name_their_distributions():
    with pytest.raises(MissingPackageError, match="flowjob-optim"):
        flow.optimizer
    with pytest.raises(MissingPackageError, match="flowjob-data"):
        flow.data.load_mnist
