"""The gpu package on any machine, and (marked ``gpu``) CuPy against numpy on a machine with a device."""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from flowjob_core import Session, make_plugin_manager
from flowjob_core.plugins.host import gather_registries
from flowjob_gpu import available_cupy, plugin
from flowjob_ops import plugin as ops_plugin
from flowjob_optim import plugin as optim_plugin
from flowjob_gpu.overrides import ARRAY_KERNEL_BUILDERS, KERNEL_BUILDERS, LIBRARY_KERNEL_BUILDERS


def test_no_device_means_no_backend_and_no_overrides(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the real CuPy's path (the switch replaces it)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)
    regs = gather_registries(make_plugin_manager(plugins=[plugin], autoload=False))
    assert regs.backends.get("gpu") is None
    assert regs.kernels.overrides("gpu") == []


def test_gpu_request_without_device_runs_on_cpu_with_one_warning(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the real CuPy's path (the switch replaces it)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)
    session = Session(make_plugin_manager(plugins=[plugin], autoload=False))
    try:
        with pytest.warns(RuntimeWarning, match="no GPU backend") as record:
            session.note_device_request("gpu")
            session.note_device_request("gpu")
        assert len(record) == 1
        assert session.backend.tag == "cpu"
    finally:
        session.close()


def test_a_device_registers_the_backend(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the real CuPy's path (the switch replaces it)
    fake = types.SimpleNamespace(__version__="0", asnumpy=np.asarray, asarray=np.asarray,
                                 cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1)),
                                 random=types.SimpleNamespace(default_rng=np.random.default_rng))
    monkeypatch.setattr(plugin, "available_cupy", lambda: fake)
    regs = gather_registries(make_plugin_manager(plugins=[ops_plugin, optim_plugin, plugin], autoload=False))
    backend = regs.backends.get("gpu")
    assert backend is not None and backend.xp is fake and backend.device_count() == 1
    assert regs.kernels.overrides("gpu") == sorted({**KERNEL_BUILDERS, **ARRAY_KERNEL_BUILDERS,
                                                    **LIBRARY_KERNEL_BUILDERS})
    assert {"elementwise_chain", "relu_grad", "sparse_softmax_cross_entropy", "optim_adam_update"} <= set(
        KERNEL_BUILDERS)


@pytest.mark.gpu
def test_relu_grad_override_matches_numpy():
    cp = available_cupy()
    from flowjob_core import BlobSpec, KernelContext
    from flowjob_gpu.elementwise_kernels import relu_grad_kernel
    for dtype in (np.float32, np.float64):
        y = np.maximum(np.random.default_rng(0).standard_normal(1000), 0).astype(dtype)
        dy = np.random.default_rng(1).standard_normal(1000).astype(dtype)
        spec = BlobSpec((1000,), dtype)
        ctx = KernelContext(cp, None, "relu_grad", "g", {}, (spec, spec), (spec,))
        got = relu_grad_kernel(ctx)(cp.asarray(y), cp.asarray(dy))
        np.testing.assert_array_equal(cp.asnumpy(got), dy * (y > 0))


@pytest.mark.gpu
def test_a_job_on_the_gpu_matches_the_cpu():
    import oneflow  # the gpu tox env installs the face
    import oneflow.typing as tp
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    results = {}
    for device in ("cpu", "gpu"):
        monkey = pytest.MonkeyPatch()
        monkey.setenv("FLOWJOB_DEVICE", device)
        oneflow.clear_default_session()

        @oneflow.global_function()
        def job(x: tp.Numpy.Placeholder((4, 5))) -> tp.Numpy:
            return oneflow.nn.relu(x)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[device] = job(x)
        monkey.undo()
    oneflow.clear_default_session()
    np.testing.assert_allclose(results["gpu"], results["cpu"])


@pytest.mark.gpu
def test_relu_grad_override_reads_non_contiguous_inputs_in_order():
    cp = available_cupy()
    from flowjob_core import BlobSpec, KernelContext
    from flowjob_gpu.elementwise_kernels import relu_grad_kernel
    rng = np.random.default_rng(2)
    y = np.maximum(rng.standard_normal((6, 5)), 0).astype(np.float32)
    dy = rng.standard_normal((6, 5)).astype(np.float32)
    spec = BlobSpec((5, 6), np.float32)
    ctx = KernelContext(cp, None, "relu_grad", "g", {}, (spec, spec), (spec,))
    got = relu_grad_kernel(ctx)(cp.asarray(y).T, cp.asarray(dy).T)  # transposed views
    np.testing.assert_array_equal(cp.asnumpy(got), dy.T * (y.T > 0))


@pytest.mark.gpu
def test_gather_out_of_range_is_an_error_on_the_gpu_too(monkeypatch):
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core.plan.planner import StepError
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    flow.clear_default_session()

    @flow.global_function()
    def pick(table: tp.Numpy.Placeholder((4, 3)), rows: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(table, rows, name="pick_rows")

    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    try:
        with pytest.raises(StepError, match=r"op 'pick_rows' \(gather\).*IndexError.*out of bounds"):
            pick(table, np.array([1, 9], np.int32))
        np.testing.assert_array_equal(pick(table, np.array([3, -1], np.int32)), table[[3, -1]])
    finally:
        flow.clear_default_session()
