"""The gpu backend's elementwise_chain kernel: one ElementwiseKernel per chain signature, built once,
launched into the planned buffer with the numbers as arguments; the xp kernel where the templates
stop. On any machine with a stand-in array module; marked ``gpu``, on CuPy against numpy's chain."""
from __future__ import annotations

import logging
import types
import warnings

import numpy as np
import pytest

from flowjob_core import BlobSpec, FlowjobError, KernelContext, make_plugin_manager
from flowjob_core.plugins.host import gather_registries
from flowjob_core.testing.modules import sibling
from flowjob_gpu import available_cupy, chain_kernels, plugin
from flowjob_gpu.chain_kernels import compiled, elementwise_chain_kernel
from flowjob_ops import plugin as ops_plugin
from flowjob_ops.records.fused import ELEMENTWISE_CHAIN

cases = sibling(__file__, "chain_cases")
OPS = cases.RECORDS | {"elementwise_chain": ELEMENTWISE_CHAIN}
STEPS = (("scalar_mul", {"scalar": 2.0}, (0,)), ("add", {}, (-1, 1)), ("relu", {}, (-1,)))


class _Kernels:
    """A stand-in for ``cupy.ElementwiseKernel``: counts the kernels built, records each launch."""

    built: list[tuple] = []

    def __init__(self, in_params: str, out_params: str, operation: str, name: str) -> None:
        type(self).built.append((in_params, out_params, operation, name))
        self.launches: list[tuple] = []

    def __call__(self, *args):
        self.launches.append(args)
        args[-1][...] = 7.0  # what the device would write into the output argument
        return args[-1]


def _device_module() -> types.ModuleType:
    """numpy's names plus an ElementwiseKernel of its own: a fresh cache key each call."""
    module = types.ModuleType("fake_cupy")
    module.__dict__.update({n: getattr(np, n) for n in dir(np) if not n.startswith("_")})
    module.ElementwiseKernel = type("Kernels", (_Kernels,), {"built": []})  # type: ignore[attr-defined]
    return module


def _context(xp, steps=STEPS, dtype=np.float32, out=None, ops=OPS) -> KernelContext:
    specs = (BlobSpec((4, 3), dtype), BlobSpec((3,), dtype))
    buffer = out if out is not None else np.empty((4, 3), dtype)
    return KernelContext(xp, None, "elementwise_chain", "chain", {"steps": steps}, specs, (BlobSpec((4, 3), dtype),),
                         _out_buffer=lambda k: buffer, ops=ops)


def test_one_kernel_object_per_signature_built_once():
    cp = _device_module()
    one = cases.Case("a", STEPS, ((4, 3), (3,)), ("float32", "float32"), "float32").kernel().source
    again = cases.Case("b", (("scalar_mul", {"scalar": 5.0}, (0,)), *STEPS[1:]), ((8, 3), (3,)),
                       ("float32", "float32"), "float32").kernel().source  # other numbers and shapes: same signature
    assert compiled(cp, one) is compiled(cp, again)
    assert cp.ElementwiseKernel.built == [(one.in_params, one.out_params, one.operation, one.name)]
    half = cases.Case("c", STEPS, ((4, 3), (3,)), ("float16", "float16"), "float16").kernel().source
    assert compiled(cp, half) is not compiled(cp, one) and len(cp.ElementwiseKernel.built) == 2


def test_the_override_launches_into_the_planned_buffer_with_the_numbers_last():
    cp = _device_module()
    out = np.zeros((4, 3), np.float32)
    run = elementwise_chain_kernel(_context(cp, out=out))
    x, b = np.ones((4, 3), np.float32), np.arange(3, dtype=np.float32)
    assert run(x, b) is out and np.all(out == 7.0)
    source = cases.Case("a", STEPS, ((4, 3), (3,)), ("float32", "float32"), "float32").kernel().source
    ((*inputs, c0, c2, dest),) = compiled(cp, source).launches
    assert inputs[0] is x and inputs[1] is b and dest is out
    assert (type(c0), c0, type(c2), c2) == (np.float32, 2.0, np.float32, 0.0)
    elementwise_chain_kernel(_context(cp))  # a second node of the same signature: no new kernel
    assert len(cp.ElementwiseKernel.built) == 1


def test_an_uncovered_chain_runs_the_xp_kernel_and_says_why(caplog):
    cp = _device_module()
    x, b = np.arange(12, dtype=np.int32).reshape(4, 3), np.arange(3, dtype=np.int32)
    with caplog.at_level(logging.DEBUG, logger="flowjob.gpu"):
        run = elementwise_chain_kernel(_context(cp, dtype=np.int32))
    np.testing.assert_array_equal(run(x, b), np.maximum(x * 2 + b, 0))
    assert cp.ElementwiseKernel.built == []
    assert "'chain' keeps the xp kernel: step 0 (scalar_mul, ufunc multiply): int32 operands" in caplog.text


def test_an_array_module_without_elementwise_kernels_runs_the_xp_kernel():
    x, b = np.ones((4, 3), np.float32), np.arange(3, dtype=np.float32)
    got = elementwise_chain_kernel(_context(np))(x, b)
    np.testing.assert_array_equal(got, np.maximum(x * np.float32(2) + b, 0))
    reason = chain_kernels.node_chain_kernel(_context(np)).reason
    assert reason == "the array module 'numpy' compiles no CUDA (no ElementwiseKernel)"


def test_a_context_without_the_op_records_is_an_error_naming_the_node():
    with pytest.raises(FlowjobError, match=r"elementwise_chain 'chain'.*KernelContext\.ops"):
        elementwise_chain_kernel(_context(_device_module(), ops=None))


def test_the_plugin_registers_the_chain_kernel_for_the_gpu(monkeypatch):
    fake = types.SimpleNamespace(__version__="0", asnumpy=np.asarray, asarray=np.asarray,
                                 cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1)))
    monkeypatch.setattr(plugin, "available_cupy", lambda: fake)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the CUDA overrides are a real device's
    regs = gather_registries(make_plugin_manager(plugins=[ops_plugin, plugin], autoload=False))
    assert "elementwise_chain" in regs.kernels.overrides("gpu")
    assert regs.kernels.lookup(ELEMENTWISE_CHAIN, "gpu") is elementwise_chain_kernel
    # the cpu backend keeps what flowjob-ops gives it (its blocked cpu override)
    ops_alone = gather_registries(make_plugin_manager(plugins=[ops_plugin], autoload=False))
    assert regs.kernels.lookup(ELEMENTWISE_CHAIN, "cpu") is ops_alone.kernels.lookup(ELEMENTWISE_CHAIN, "cpu")


# on a device --------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", cases.DEVICE_CASES, ids=lambda c: c.name)
def test_each_case_on_the_device_gives_numpys_chain_result(case):
    cp = available_cupy()
    kernel = case.kernel()
    arrays = cases.operands(case)
    out = cp.empty(case.out_shape, case.out)
    compiled(cp, kernel.source)(*[cp.asarray(a) for a in arrays], *kernel.constants, out)  # CuPy broadcasts
    cases.assert_chain_equal(case, cp.asnumpy(out), cases.device_chain(case, arrays))


@pytest.mark.gpu
def test_the_override_reads_non_contiguous_and_broadcast_inputs_on_the_device():
    cp = available_cupy()
    case = cases.Case("t", STEPS, ((4, 3), (3,)), ("float32", "float32"), "float32")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32).T  # a transposed view
    b = np.array([-1.0, 0.0, 1.0], np.float32)
    out = cp.empty((4, 3), np.float32)
    run = elementwise_chain_kernel(_context(cp, out=out))
    assert run(cp.asarray(x.T).T, cp.asarray(b)) is out
    cases.assert_chain_equal(case, cp.asnumpy(out), cases.device_chain(case, [np.ascontiguousarray(x), b]))


@pytest.mark.gpu
def test_a_fused_job_runs_its_chain_as_one_generated_kernel_on_the_gpu(monkeypatch):
    import oneflow as flow
    import oneflow.typing as tp
    built: list[str] = []
    real = chain_kernels.compiled
    monkeypatch.setattr(chain_kernels, "compiled", lambda cp, source: built.append(source.name) or real(cp, source))
    rng = np.random.default_rng(3)
    x, b = rng.standard_normal((64, 33)).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    results, ops = {}, {}
    for device in ("cpu", "gpu"):
        monkeypatch.setenv("FLOWJOB_DEVICE", device)
        flow.clear_default_session()

        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((64, 33)), b: tp.Numpy.Placeholder((33,))) -> tp.Numpy:
            return flow.math.tanh(x * 2.0 + b) * 0.5

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[device] = job(x, b)
        ops[device] = [n.op for n in job.plan().order]
    flow.clear_default_session()
    assert ops["cpu"].count("elementwise_chain") == ops["gpu"].count("elementwise_chain") == 1
    assert len(built) == 1  # the gpu plan built the chain's kernel; the cpu one ran numpy's
    np.testing.assert_allclose(results["gpu"], results["cpu"], rtol=2e-6, atol=1e-7)  # tanh: CUDA's, numpy's
