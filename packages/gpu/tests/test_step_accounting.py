"""Step accounting (flowjob_gpu.step_accounting) on the emulated CuPy: a LeNet and an MLP training step as the
gpu backend records them, their graphs, live pieces, live nodes and host traffic per step, and the emulation's
counts of host synchronizations and copies themselves."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_gpu import plugin
from flowjob_gpu.step_accounting import account, peak_pool_bytes, step_shape
from flowjob_gpu.step_graphs import GraphedStep


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _training_job(kind: str):
    """(job function, one call) of the benchmarks' LeNet or MLP training job on a batch of 4: SGD with a
    constant schedule, the sparse softmax cross entropy, dropout in LeNet."""
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()
    init = flow.kaiming_initializer(distribution="random_normal", mode="fan_in", nonlinearity="relu")

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 1, 28, 28)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)
              ) -> tp.Numpy:
        if kind == "lenet":
            h = flow.layers.conv2d(x, 4, 5, padding="SAME", activation=flow.nn.relu, name="conv1",
                                   kernel_initializer=init)
            h = flow.nn.max_pool2d(h, ksize=2, strides=2, padding="SAME", name="pool1")
            h = flow.layers.conv2d(h, 8, 5, padding="SAME", activation=flow.nn.relu, name="conv2",
                                   kernel_initializer=init)
            h = flow.nn.max_pool2d(h, ksize=2, strides=2, padding="SAME", name="pool2")
            h = flow.reshape(h, [4, -1])
            h = flow.layers.dense(h, 16, activation=flow.nn.relu, kernel_initializer=init, name="dense1")
            h = flow.nn.dropout(h, rate=0.5, seed=2, name="dropout")
        else:
            h = flow.layers.dense(flow.reshape(x, [4, -1]), 16, activation=flow.nn.relu, kernel_initializer=init,
                                  name="hidden")
        logits = flow.layers.dense(h, 10, kernel_initializer=init, name="output")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    images = rng.random((4, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, 4).astype(np.int32)
    return train, lambda: train(images, labels)


@pytest.mark.parametrize("kind", ["lenet", "mlp"])
def test_a_training_step_replays_as_one_graph_without_a_live_piece_or_a_synchronization(emulation, kind):
    import oneflow as flow
    function, call = _training_job(kind)
    counted = account(function, call, steps=3)
    flow.clear_default_session()
    assert counted.recorded and counted.uncaptured is None
    assert (counted.graphs, counted.live_pieces, counted.pieces, counted.live_nodes) == (1, 0, 1, ())
    # dropout's mask is drawn on the device, the learning rate computed there; the cross entropy's count of bad
    # labels is copied to pinned host memory without a wait: one copy, no synchronization
    assert counted.host_syncs == 0.0
    assert counted.host_device_copies == 1.0
    assert counted.as_dict()["pieces"] == counted.pieces


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["lenet", "mlp"])
def test_on_the_device_a_training_step_replays_as_one_graph_giving_the_unrecorded_losses(monkeypatch, kind):
    """The hand kernels (cross entropy, optimizer, pooling, dropout's mask kernel) on CuPy: still one graph."""
    import oneflow as flow
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")
    losses = {}
    for graphs in ("1", "0"):
        monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", graphs)
        function, call = _training_job(kind)
        counted = account(function, call, steps=2)
        losses[graphs] = [float(np.mean(call())) for _ in range(3)]
        flow.clear_default_session()
        if graphs == "1":
            assert counted.recorded and (counted.graphs, counted.live_nodes) == (1, ()), counted
    np.testing.assert_allclose(losses["1"], losses["0"], rtol=1e-5)


def test_a_step_run_with_recording_off_says_it_is_not_recorded(emulation, monkeypatch):
    import oneflow as flow
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    function, call = _training_job("mlp")
    counted = account(function, call, steps=1)
    step = function.plan().step
    flow.clear_default_session()
    assert not isinstance(step, GraphedStep)
    assert not counted.recorded and counted.graphs == counted.live_pieces == 0
    assert "FLOWJOB_CUDA_GRAPHS=0" in counted.uncaptured
    # nobody reads the cross entropy's count without waiting: its kernel reads it back itself
    assert counted.host_syncs == 1.0
    assert step_shape("j", step)["recorded"] is False


def test_the_emulation_counts_synchronizations_and_copies_inside_a_block():
    from flowjob_gpu.emulation import host_traffic
    from flowjob_gpu.emulation.toplevel import build
    cp = build()
    a = cp.asarray(np.arange(3.0))  # outside: not counted
    with host_traffic.counting() as outer:
        b = cp.asarray(np.ones(3))  # a copy to the device
        with host_traffic.counting() as inner:
            float(b[0])  # a read back: a copy and a wait
        cp.cuda.get_current_stream().synchronize()  # a wait
        cp.asarray(a)  # already on the device: nothing
        cp.nonzero(a)  # its size is read back: a wait and a copy
    assert (inner.syncs, inner.copies) == (1, 1)
    assert (outer.syncs, outer.copies) == (3, 3)
    assert outer.operations["cupy.asarray of host data"] == 1


class _Pool:
    def __init__(self, size: int) -> None:
        self.size = size

    def total_bytes(self) -> int:
        return self.size


def test_peak_pool_bytes_counts_the_graphs_pools_and_the_recording_peak():
    class Cupy:
        pool = _Pool(100)

        @classmethod
        def get_default_memory_pool(cls):
            return cls.pool

    step = GraphedStep.__new__(GraphedStep)
    step.pool, step.recording_bytes = _Pool(50), 120
    assert peak_pool_bytes(Cupy, [step]) == 150
    step.recording_bytes = 400
    assert peak_pool_bytes(Cupy, [step, object()]) == 400
    assert peak_pool_bytes(Cupy, []) == 100
