"""The gpu backend's gather (flowjob_gpu.device_gather) on the emulated CuPy: the CPU's values and gradients for
indices in range (negative ones counting from the end); zeros and no gradient for those out of range, with one
warning from the count kept on the device; a recorded step holds the gather with nothing read back."""
from __future__ import annotations

import warnings

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


def test_indices_out_of_range_gather_zeros_pass_no_gradient_and_warn_once(gpu):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, after, step = _train([OUT_OF_RANGE] * 5)
    assert step.recorded and not step.live_nodes(), step.live_nodes()
    messages = [str(w.message) for w in caught if "indices lie outside" in str(w.message)]
    assert messages == [messages[0]] and "op 'pick' (gather): 3 indices lie outside [-5, 5) for axis 1" in messages[0]
    bad = (OUT_OF_RANGE < -5) | (OUT_OF_RANGE >= 5)
    np.testing.assert_array_equal(got[0][:, ~bad], TABLE[:, OUT_OF_RANGE[~bad]])
    for gathered in got:
        assert (gathered[:, bad] == 0).all() and (gathered[:, ~bad] != 0).all()
    # the gradient reached only the rows gathered in range (2 and 4); rows 0, 1 and 3 never moved
    np.testing.assert_array_equal(after[:, [0, 1, 3]], TABLE[:, [0, 1, 3]])
    assert not np.allclose(after[:, [2, 4]], TABLE[:, [2, 4]])
