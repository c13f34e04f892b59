"""Counts kept on the device (flowjob_ops.kernels.device_counts) on the gpu backend: the sparse cross entropy's bad
labels are counted on the emulated device and read by the recorded step without a synchronization (an asynchronous
copy into pinned memory, flowjob_gpu.count_reads), still warning once; with recording off the kernel reads the count
back itself."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from flowjob_gpu import plugin
from flowjob_gpu.step_accounting import account

N, C = 6, 10
LABELS = np.array([0, 9, -1, 10, -10, 3], np.int32)  # rows 2, 3, 4 lie outside [0, 10)


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _job():
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(labels: tp.Numpy.Placeholder((N,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.get_variable("logits", shape=(N, C), initializer=flow.random_normal_initializer(seed=0))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="xent")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return loss

    return train


def _messages(caught: list) -> list[str]:
    return [str(w.message) for w in caught if "outside the class range" in str(w.message)]


@pytest.mark.parametrize("graphs", ["1", "0"])
def test_bad_labels_are_counted_on_the_device_and_warned_once(emulation, monkeypatch, graphs):
    import oneflow as flow
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", graphs)
    train = _job()
    good = np.arange(N, dtype=np.int32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            train(good)
        assert not _messages(caught)  # all in range: nothing to say
        losses = [train(LABELS) for _ in range(3)]
    step = train.plan().step
    flow.clear_default_session()
    [message] = _messages(caught)
    assert "op 'xent' (sparse_softmax_cross_entropy): 3 of 6 labels lie outside the class range [0, 10)" in message
    for loss in losses:
        assert (loss[(LABELS < 0) | (LABELS >= C)] == 0).all() and (loss[[0, 1, 5]] > 0).all()
    if graphs == "1":
        assert step.recorded and not [n for n in step.live_nodes() if "cross_entropy" in n], step.live_nodes()


def test_a_recorded_step_reads_the_count_without_a_synchronization(emulation):
    import oneflow as flow
    train = _job()
    counted = account(train, lambda: train(np.arange(N, dtype=np.int32)), steps=2)
    flow.clear_default_session()
    assert "(sparse_softmax_cross_entropy)" not in " ".join(counted.live_nodes)
    # the learning rate is the step's only live piece here (its own sync); the count is one asynchronous copy
    assert counted.host_device_copies >= 1


def test_the_emulation_counts_an_asynchronous_copy_to_the_host_as_a_copy_not_a_wait():
    from flowjob_gpu.emulation import host_traffic
    from flowjob_gpu.emulation.toplevel import build
    cp = build()
    a = cp.arange(3, dtype=np.int64)
    host = np.zeros(3, np.int64)
    with host_traffic.counting() as traffic:
        a.get(out=host, blocking=False)
    assert (traffic.syncs, traffic.copies) == (0, 1) and host.tolist() == [0, 1, 2]
    with host_traffic.counting() as traffic:
        a.get(out=host)
    assert (traffic.syncs, traffic.copies) == (1, 1)
