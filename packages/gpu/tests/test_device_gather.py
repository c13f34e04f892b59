"""The gpu backend's gather (flowjob_gpu.device_gather) on the emulated CuPy: the CPU's values and gradients for
indices in range (negative ones counting from the end); for those out of range, zeros and no gradient in the step
and an IndexError naming the op raised by the call, counted on the device, recorded step or not; a recorded step
holds the gather with nothing read back."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_gpu import plugin

TABLE = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3) / 10
WEIGHTS = np.linspace(-1, 1, 4 * 2 * 3 * 3, dtype=np.float32).reshape(4, 2, 3, 3)
IN_RANGE = np.array([[0, 4, -1], [2, 2, -5]], np.int32)
# 6, -7 and 8 lie outside [-5, 5) (wrapped around they would reach rows 1 and 3, clipped rows 0 and 4)
OUT_OF_RANGE = np.array([[4, 6, -1], [2, -7, 8]], np.int32)


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _train(indices_list):
    """The gathered values per call, the variable after the calls (SGD at lr 1 on sum(gathered * WEIGHTS)) and
    the plan's step."""
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core import get_default_session
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(indices: tp.Numpy.Placeholder((2, 3), dtype=flow.int32),
              weights: tp.Numpy.Placeholder((4, 2, 3, 3))) -> tp.Numpy:
        table = flow.get_variable("table", (4, 5, 3), initializer=flow.zeros_initializer())
        gathered = flow.gather(table, indices, axis=1, name="pick")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(
            flow.math.reduce_sum(gathered * weights))
        return gathered

    train.ensure_traced()
    get_default_session().variables.assign("table", TABLE)
    outs = [train(indices, WEIGHTS) for indices in indices_list]
    flow.sync_default_session()
    after = get_default_session().variables.get("table").copy()
    step = train.plan().step
    flow.clear_default_session()
    return outs, after, step


def test_indices_in_range_give_the_cpus_values_and_gradients(gpu, monkeypatch):
    calls = [IN_RANGE, IN_RANGE[::-1], IN_RANGE]  # the warm-up, the recording, a replay
    got, after, step = _train(calls)
    assert step.recorded
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")
    monkeypatch.delenv("FLOWJOB_GPU_EMULATION")
    want, want_after, _ = _train(calls)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_allclose(after, want_after, rtol=1e-6)


def _pick():
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()

    @flow.global_function()
    def pick(table: tp.Numpy.Placeholder((4, 3)), rows: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(table, rows, name="pick_rows")

    return pick


@pytest.mark.parametrize("graphs", ["1", "0"])
def test_an_index_out_of_range_is_the_calls_error_recorded_or_not(gpu, monkeypatch, graphs):
    import oneflow as flow
    from flowjob_core.plan.planner import StepError
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", graphs)
    pick = _pick()
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    error = r"op 'pick_rows' \(gather\).*IndexError.*1 indices out of bounds for axis 0 with size 4"
    try:
        with pytest.raises(StepError, match=error):
            pick(table, np.array([1, 9], np.int32))  # the warm-up: its count read back at once
        for k in range(4):  # the recording and replays: the count read without waiting, the error still the call's
            np.testing.assert_array_equal(pick(table, np.array([3, -1 - k], np.int32)), table[[3, -1 - k]])
            with pytest.raises(StepError, match=error.replace("1 indices", "2 indices")):
                pick(table, np.array([-5, 4], np.int32))
        step = pick.plan().step
        if graphs == "1":
            assert step.recorded and not step.live_nodes(), step.live_nodes()
    finally:
        flow.clear_default_session()


def test_a_step_with_indices_out_of_range_scatters_nothing_back_for_them(gpu):
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core import get_default_session
    from flowjob_core.plan.planner import StepError
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(indices: tp.Numpy.Placeholder((2, 3), dtype=flow.int32),
              weights: tp.Numpy.Placeholder((4, 2, 3, 3))) -> tp.Numpy:
        table = flow.get_variable("table", (4, 5, 3), initializer=flow.zeros_initializer())
        gathered = flow.gather(table, indices, axis=1, name="pick")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(
            flow.math.reduce_sum(gathered * weights))
        return gathered

    try:
        train.ensure_traced()
        get_default_session().variables.assign("table", TABLE)
        for _ in range(4):  # the warm-up, the recording, two replays: each the error of its own call
            with pytest.raises(StepError, match=r"op 'pick' \(gather\).*3 indices out of bounds for axis 1"):
                train(OUT_OF_RANGE, WEIGHTS)
        assert train.plan().step.recorded
        flow.sync_default_session()
        after = get_default_session().variables.get("table")
        # the steps ran before their errors: the rows gathered in range (2 and 4) moved; rows 0, 1 and 3, which
        # the bad indices would reach wrapped around or clipped, never did
        np.testing.assert_array_equal(after[:, [0, 1, 3]], TABLE[:, [0, 1, 3]])
        assert not np.allclose(after[:, [2, 4]], TABLE[:, [2, 4]])
    finally:
        flow.clear_default_session()
