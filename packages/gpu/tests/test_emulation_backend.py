"""``FLOWJOB_GPU_EMULATION=1``: the gpu backend on the emulated CuPy, the default device without a GPU,
its kernels CuPy-clean; a small training job there matches the CPU."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_gpu.emulation.factory import emulated_cupy
from flowjob_core import Session, make_plugin_manager, switches
from flowjob_core.plugins.host import gather_registries
from flowjob_ops import plugin as ops_plugin
from flowjob_gpu import plugin
from flowjob_gpu.emulation.backend import NAME
from flowjob_gpu.random import HostSeededGenerator

cp = emulated_cupy()


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.delenv("FLOWJOB_DEVICE", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)  # as on a machine without CuPy or a device


def test_the_switch_is_declared_and_off_by_default(monkeypatch):
    monkeypatch.delenv("FLOWJOB_GPU_EMULATION", raising=False)
    assert switches.current().gpu_emulation is False
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "on")
    assert switches.current().gpu_emulation is True
    assert "FLOWJOB_GPU_EMULATION" in [row[0] for row in switches.current().describe()]


def test_the_switch_registers_the_emulated_backend_without_a_device(emulation):
    regs = gather_registries(make_plugin_manager(plugins=[ops_plugin, plugin], autoload=False))
    backend = regs.backends.get("gpu")
    assert backend is not None and backend.name == NAME and backend.xp is cp and not backend.host_arrays
    assert backend.device_count() == 1 and "emulated" in backend.description
    assert backend.to_host is cp.asnumpy and backend.from_host is cp.asarray
    assert type(backend.make_rng(0)) is HostSeededGenerator  # numpy's stream, copied to the device, as on a GPU
    backend.synchronize()
    # the hand-written CUDA overrides are not registered on the emulation; the array-code ones (dropout's device
    # stream, the device-checked gather) are, where flowjob-ops' plugin registered those ops
    assert sorted(regs.kernels.overrides("gpu")) == ["dropout", "gather", "gather_grad"]
    assert not gather_registries(make_plugin_manager(plugins=[plugin], autoload=False)).kernels.overrides("gpu")


def test_the_emulated_gpu_is_the_default_device(emulation):
    session = Session(make_plugin_manager(plugins=[plugin], autoload=False))
    try:
        assert session.requested_device() == "gpu" and session.backend.name == NAME
        session.note_device_request("gpu")  # no warning: the placement is the session's own device
    finally:
        session.close()


def test_transfers_are_the_only_way_across(emulation):
    backend = gather_registries(make_plugin_manager(plugins=[plugin], autoload=False)).backends.get("gpu")
    host = np.arange(4, dtype=np.float32)
    device = backend.from_host(host)
    assert type(device) is cp.ndarray and not isinstance(device, np.ndarray)
    with pytest.raises(TypeError):
        np.asarray(device)
    back = backend.to_host(device * 2)
    assert type(back) is np.ndarray and back.tolist() == [0.0, 2.0, 4.0, 6.0]


def _train(steps: int) -> tuple[list[float], np.ndarray, str]:
    """Losses of ``steps`` SGD steps of relu(x @ w), the prediction after them, and the backend that ran them."""
    import oneflow as flow  # the gpu tox env installs the face
    import oneflow.typing as tp
    from flowjob_core.runtime.session import get_default_session

    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 5)), y: tp.Numpy.Placeholder((8, 3))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_uniform_initializer(-0.5, 0.5))
        hidden = flow.nn.relu(flow.matmul(x, w))
        loss = flow.math.reduce_mean(flow.math.square(hidden - y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_uniform_initializer(-0.5, 0.5))
        return flow.nn.relu(flow.matmul(x, w))

    x = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    losses = [float(train(x, y)) for _ in range(steps)]
    result = predict(x)
    backend = get_default_session().backend.name
    flow.clear_default_session()
    return losses, result, backend


def test_a_train_step_on_the_emulated_gpu_matches_the_cpu(monkeypatch):
    monkeypatch.delenv("FLOWJOB_DEVICE", raising=False)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")
    cpu_losses, cpu_result, cpu_backend = _train(3)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    gpu_losses, gpu_result, gpu_backend = _train(3)
    assert cpu_backend != NAME and gpu_backend == NAME
    assert type(gpu_result) is np.ndarray  # results come back through to_host
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    np.testing.assert_allclose(gpu_result, cpu_result, rtol=1e-5, atol=1e-6)
    assert gpu_losses[-1] < gpu_losses[0]
