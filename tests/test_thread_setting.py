"""The one thread setting of a step: ``FLOWJOB_HOST_THREADS``, else legacy ``flow.config.compute_thread_pool_size``,
else ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, else the CPUs the process may run on."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, get_default_session


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch):
    for variable in ("FLOWJOB_HOST_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")  # the host threads are the cpu backend's (an emulated GPU has none)
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _run_a_job() -> np.ndarray:
    @flow.global_function()
    def twice(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.math.add(x, x)

    return twice(np.ones((4, 3), np.float32))


def test_compute_thread_pool_size_gives_the_host_threads_of_a_step():
    flow.config.compute_thread_pool_size(3)
    np.testing.assert_array_equal(_run_a_job(), np.full((4, 3), 2, np.float32))
    assert get_default_session().backend.lanes.threads == 3


def test_the_environment_variable_of_the_person_running_the_program_wins(monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    flow.config.compute_thread_pool_size(3)
    _run_a_job()
    assert get_default_session().backend.lanes.threads == 2


def test_the_program_setting_wins_over_the_blas_variables(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    flow.config.compute_thread_pool_size(2)
    _run_a_job()
    assert get_default_session().backend.lanes.threads == 2


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "4"])
def test_a_thread_count_that_is_not_a_positive_int_is_refused_by_name(bad):
    with pytest.raises(ConfigError, match="compute_thread_pool_size"):
        flow.config.compute_thread_pool_size(bad)
    np.testing.assert_array_equal(_run_a_job(), np.full((4, 3), 2, np.float32))  # the session goes on


def test_set_after_the_first_job_it_warns_that_the_steps_keep_their_count(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    _run_a_job()
    with pytest.warns(RuntimeWarning, match="keep their thread count"):
        flow.config.compute_thread_pool_size(2)
    assert get_default_session().backend.lanes.threads == 1
