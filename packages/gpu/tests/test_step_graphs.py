"""Whole-step CUDA graphs (flowjob_gpu.step_graphs) on the emulated CuPy, whose streams capture and whose graphs
replay as a GPU's do (nothing runs while a stream captures; a synchronizing call there fails the capture); and,
``gpu``-marked, the same training steps on a real device."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from flowjob_gpu import available_cupy, plugin
from flowjob_gpu.step_graphs import GraphedStep


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.delenv("FLOWJOB_DEVICE", raising=False)
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _train(steps: int, *, accumulate: int = 1) -> tuple[list[float], np.ndarray, object]:
    """Losses of a small training job with a learning-rate schedule (on the device), dropout (a device stream),
    batch normalization (its moving averages: recorded), and a division whose kernel checks its divisor on
    the host (found live by a failed capture); the prediction after; the train job's plan step."""
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()
    config = flow.FunctionConfig()
    if accumulate > 1:
        config.train.num_gradient_accumulation_steps(accumulate)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.Numpy.Placeholder((8, 5)), y: tp.Numpy.Placeholder((8, 3))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_uniform_initializer(-0.5, 0.5))
        hidden = flow.layers.batch_normalization(flow.matmul(x, w), axis=1, name="bn")
        hidden = flow.nn.dropout(flow.nn.relu(hidden), rate=0.25, seed=3)
        count = flow.constant(2, dtype=flow.int32, shape=(8, 3))
        halves = flow.cast(flow.math.divide(flow.cast(y * 8, flow.int32), count), flow.float)  # int_divide
        loss = flow.math.reduce_mean(flow.math.square(hidden - halves / 4))
        schedule = flow.optimizer.PiecewiseConstantScheduler([2], [0.1, 0.05])
        flow.optimizer.Adam(schedule).minimize(loss)
        return loss

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_uniform_initializer(-0.5, 0.5))
        return flow.nn.relu(flow.layers.batch_normalization(flow.matmul(x, w), axis=1, name="bn", trainable=False,
                                                            training=False))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    losses = [float(train(x + i, y).mean()) for i in range(steps)]
    result = predict(x)
    step = train.plan().step
    flow.clear_default_session()
    return losses, result, step


def test_a_recorded_train_step_gives_the_uncaptured_steps_numbers(emulation, monkeypatch, caplog):
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain_losses, plain_result, plain_step = _train(6)
    assert not isinstance(plain_step, GraphedStep)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    with caplog.at_level(logging.DEBUG, logger="flowjob_gpu.step_graphs"):
        losses, result, step = _train(6)
    assert isinstance(step, GraphedStep) and step.uncaptured is None, step.uncaptured
    assert step.replay is not None and step.graph_count >= 2
    live_ops = {call.node.op for piece, graph in step.replay if graph is None for call in piece.calls}
    # the learning rate is computed on the device, the dropout mask drawn there (its counter advanced inside the
    # graph): only the integer division, which checks its divisor on the host, is live
    assert live_ops == {"int_divide"}
    # the integer division checks its divisor on the host: its capture failed, and it runs live since
    assert any("runs live beside the CUDA graphs" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-6)
    np.testing.assert_allclose(result, plain_result, rtol=1e-6)


def test_results_are_copies_that_the_next_replay_leaves_alone(emulation):
    import oneflow as flow
    import oneflow.typing as tp

    flow.clear_default_session()

    @flow.global_function()
    def double(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.math.square(x) * 2

    got = [double(np.full(4, i, np.float32)) for i in range(5)]
    step = double.plan().step
    flow.clear_default_session()
    assert isinstance(step, GraphedStep) and step.graph_count == 1
    for i, value in enumerate(got):
        np.testing.assert_array_equal(value, np.full(4, 2.0 * i * i))


def test_a_stream_that_cannot_capture_runs_the_step_uncaptured_and_says_why(emulation, monkeypatch, caplog):
    from flowjob_gpu.emulation.factory import emulated_cupy
    cp = emulated_cupy()

    def refuse(self, mode=None):
        raise RuntimeError("This function is not supported on HIP")

    monkeypatch.setattr(cp.cuda.Stream, "begin_capture", refuse)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain_losses, _, _ = _train(4)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    with caplog.at_level(logging.INFO, logger="flowjob_gpu.step_graphs"):
        losses, _, step = _train(4)
    assert step.replay is None and "cannot be captured" in step.uncaptured
    assert any("runs without CUDA graphs" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-6)


def test_gradient_accumulation_gates_run_live(emulation, monkeypatch):
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain_losses, plain_result, _ = _train(6, accumulate=2)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    losses, result, step = _train(6, accumulate=2)
    assert step.replay is not None
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-6)
    np.testing.assert_allclose(result, plain_result, rtol=1e-6)


def _divide_job():
    import oneflow as flow
    import oneflow.typing as tp

    flow.clear_default_session()

    @flow.global_function()
    def divide(a: tp.Numpy.Placeholder((4,), dtype=flow.int32), b: tp.Numpy.Placeholder((4,), dtype=flow.int32)
               ) -> tp.Numpy:
        return flow.math.divide(a * 3, b) + 1  # int_divide reads back whether b holds a zero

    return divide


def test_a_kernel_error_while_recording_is_the_steps_and_the_job_goes_on(emulation):
    from flowjob_core.plan.planner import StepError

    divide = _divide_job()
    a, b = np.arange(4, dtype=np.int32), np.full(4, 2, np.int32)
    np.testing.assert_array_equal(divide(a, b), a * 3 // 2 + 1)  # the warm-up
    with pytest.raises(StepError, match=r"op 'Divide_\d+' \(int_divide\).*integer division by zero"):
        divide(a, np.zeros(4, np.int32))  # the recording: the capture fails, the node runs live and raises
    for k in (1, 2, 3):
        np.testing.assert_array_equal(divide(a + k, b), (a + k) * 3 // 2 + 1)
    step = divide.plan().step
    assert step.replay is not None and step.found_live


def test_too_many_live_nodes_found_stop_the_recording_naming_the_last(emulation, monkeypatch, caplog):
    from flowjob_gpu import step_graphs

    monkeypatch.setattr(step_graphs, "MAX_FOUND_LIVE", 0)
    divide = _divide_job()
    a, b = np.arange(4, dtype=np.int32), np.full(4, 2, np.int32)
    with caplog.at_level(logging.INFO, logger="flowjob_gpu.step_graphs"):
        for k in range(3):
            np.testing.assert_array_equal(divide(a + k, b), (a + k) * 3 // 2 + 1)
    step = divide.plan().step
    assert step.replay is None and "more than 0 of its kernels work on the host" in step.uncaptured
    assert "(int_divide)" in step.uncaptured
    assert [r.getMessage() for r in caplog.records if "without CUDA graphs" in r.getMessage()]


@pytest.mark.gpu
def test_on_the_device_a_recorded_train_step_gives_the_uncaptured_steps_numbers(monkeypatch):
    assert available_cupy() is not None
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain_losses, plain_result, _ = _train(6)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    losses, result, step = _train(6)
    assert isinstance(step, GraphedStep) and step.uncaptured is None, step.uncaptured
    assert step.graph_count >= 2
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    np.testing.assert_allclose(result, plain_result, rtol=1e-5)
