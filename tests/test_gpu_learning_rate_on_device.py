"""On the gpu backend (the emulated CuPy) the learning rate is computed on the device from the train-step counter:
every schedule's device form runs on CuPy's names and gives numpy's values, and a training step with a decaying,
warmed-up schedule records as one graph with no live node, giving the unrecorded step's losses."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_gpu import plugin
from flowjob_optim import schedules as s

SCHEDULES = [
    s.PiecewiseConstantScheduler([3, 10], [0.1, 0.05, 0.01], warmup=s.ConstantWarmup(2, 0.5)),
    s.PiecewiseScalingScheduler(0.2, [5, 30], 0.5),
    s.CosineScheduler(0.1, 50, alpha=0.05, warmup=s.LinearWarmup(7, 0.2)),
    s.LinearCosineScheduler(0.1, 60, num_periods=1.5),
    s.PolynomialScheduler(0.1, 30, power=0.5, cycle=True), s.PolynomialScheduler(0.1, 30, power=2.0),
    s.ExponentialScheduler(0.1, 10, 0.9, staircase=True), s.InverseTimeScheduler(0.1, 10, 0.5),
    s.NaturalExpScheduler(0.1, 10, 0.3),
]


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_each_schedules_device_form_runs_on_cupys_names(schedule):
    from flowjob_gpu.emulation.toplevel import build
    cp = build()
    steps = np.arange(0, 80, dtype=np.int64)
    got = schedule.rate_on_device(cp, cp.asarray(steps))
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(got.get(), schedule.rate_on_device(np, steps))


def _losses(steps: int):
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 5)), y: tp.Numpy.Placeholder((8, 3))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_normal_initializer(stddev=0.5, seed=1))
        loss = flow.math.reduce_mean(flow.math.square(flow.matmul(x, w) - y))
        schedule = flow.optimizer.CosineScheduler(0.5, 6, alpha=0.1, warmup=flow.optimizer.warmup.linear(2, 0.1))
        flow.optimizer.SGD(schedule, momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    losses = [float(train(x, y).mean()) for _ in range(steps)]
    step = train.plan().step
    flow.clear_default_session()
    return losses, step


def test_a_scheduled_training_step_records_whole_and_gives_the_unrecorded_and_cpu_losses(emulation, monkeypatch):
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain, _ = _losses(9)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    recorded, step = _losses(9)
    assert step.recorded and step.graph_count == 1 and not step.live_nodes(), step.live_nodes()
    np.testing.assert_allclose(recorded, plain, rtol=1e-6)
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")
    monkeypatch.delenv("FLOWJOB_GPU_EMULATION")
    on_cpu, _ = _losses(9)
    np.testing.assert_allclose(recorded, on_cpu, rtol=1e-5)
