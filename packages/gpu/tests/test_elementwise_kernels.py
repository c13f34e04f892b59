"""The gpu backend's relu_grad (flowjob-kernels' cuda/elementwise.cu, flowjob_gpu.elementwise_kernels).

Without a device: the CUDA source itself, compiled by the host C++ compiler with one thread walking the
grid-stride loop, against the op record's ``dy * (y > 0)`` bit for bit (NaN, inf, the sign of zeros,
subnormals); the builder against a stand-in CuPy. With a device (``gpu``): the kernel against the record with
CuPy's flush of float32 subnormals modelled (``-ftz=true``: a subnormal y compares as 0)."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_gpu import available_cupy, elementwise_kernels
from flowjob_kernels import entry_points, source

CXX = shutil.which("g++") or shutil.which("clang++")
# the CUDA names a grid-stride kernel uses, for one host thread: block 0 of a one-block grid of one thread
HOST_PRELUDE = """
#define __global__
struct Dim { long long x; };
static const Dim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
"""


def special(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 2.5, -3.0, info.smallest_subnormal,
                     -info.smallest_subnormal, info.max], dtype)


def pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every (y, dy) pair of special values."""
    values = special(dtype)
    y, dy = np.meshgrid(values, values, indexing="ij")
    return y.ravel().copy(), dy.ravel().copy()


def record(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """The op record's kernel (flowjob_ops.records.activations): dy * (y > 0)."""
    with np.errstate(invalid="ignore"):
        return dy * (y > 0)


def assert_bitwise(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got, want)
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]), err_msg="the sign of a zero")


@pytest.fixture(scope="module")
def host_elementwise(tmp_path_factory):
    """cuda/elementwise.cu compiled for the host (no contraction, no fast math), or skipped without a compiler."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++ or clang++) on PATH")
    folder = tmp_path_factory.mktemp("elementwise")
    cpp = folder / "elementwise.cpp"
    cpp.write_text(HOST_PRELUDE + source("elementwise"))
    lib = folder / "elementwise.so"
    done = subprocess.run([CXX, "-O1", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-o", str(lib),
                           str(cpp)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_source_gives_the_records_product_with_the_mask_bit_for_bit(host_elementwise, dtype):
    y, dy = pairs(dtype)
    dx = np.empty_like(y)
    symbol = elementwise_kernels.RELU_BACKWARD[np.dtype(dtype).name]
    getattr(host_elementwise, symbol)(*(ctypes.c_void_p(a.ctypes.data) for a in (y, dy, dx)),
                                      ctypes.c_longlong(y.size))
    assert_bitwise(dx, record(y, dy))
    # the cases the old select (y > 0 ? dy : 0) got wrong: inf/NaN dy where y <= 0, a negative dy's -0
    off = ~(y > 0)
    assert np.isnan(dx[off & ~np.isfinite(dy)]).all()
    assert np.signbit(dx[off & (dy < 0)]).all()


class _StandInCupy:
    int64 = np.int64
    ascontiguousarray = staticmethod(np.ascontiguousarray)

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

    class RawModule:
        launches: list = []

        def __init__(self, code: str) -> None:
            self.symbols = entry_points(code)

        def get_function(self, symbol: str):
            assert symbol in self.symbols

            def launch(grid, block, args):
                _StandInCupy.RawModule.launches.append((symbol, grid, block))
                y, dy, dx, n = args
                assert y.flags.c_contiguous and dy.flags.c_contiguous and int(n) == dx.size
                np.copyto(dx, record(y, dy).reshape(dx.shape))
            return launch


def _context(cp, dtype, shape=(6, 5), ops=None) -> KernelContext:
    spec = BlobSpec(shape, np.dtype(dtype))
    ctx = KernelContext(cp, None, "relu_grad", "g", {}, (spec, spec), (spec,), ops=ops)
    ctx.out = lambda i: np.empty(shape, dtype)  # type: ignore[method-assign]  # the planned buffer
    return ctx


def test_the_builder_launches_one_grid_stride_kernel_on_contiguous_inputs(monkeypatch):
    from flowjob_gpu import sources
    sources.compiled_module.cache_clear()
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    cp = _StandInCupy
    cp.RawModule.launches.clear()
    rng = np.random.default_rng(0)
    y, dy = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((5, 6)).astype(np.float32)
    got = elementwise_kernels.relu_grad_kernel(_context(cp, np.float32))(y.T, dy.T)  # transposed views
    sources.compiled_module.cache_clear()
    assert_bitwise(got, record(y.T, dy.T))
    assert cp.RawModule.launches == [("relu_backward_f32", (1,), (256,))]


def test_a_dtype_without_an_entry_point_runs_the_records_kernel():
    class Ops(dict):
        pass

    class Record:
        @staticmethod
        def kernel(ctx):
            return "the record's kernel"

    ops = Ops(relu_grad=Record())
    assert elementwise_kernels.relu_grad_kernel(_context(_StandInCupy, np.float16, ops=ops)) == "the record's kernel"


def test_the_overrides_name_entry_points_of_the_family():
    declared = entry_points(source(elementwise_kernels.FAMILY))
    for family, symbols in elementwise_kernels.OVERRIDES.values():
        assert family == "elementwise" and set(symbols.values()) <= set(declared)


def _flushed(a: np.ndarray) -> np.ndarray:
    """CuPy's -ftz=true on a float32 operand: a subnormal reads as a zero of its sign."""
    if a.dtype != np.float32:
        return a
    return np.where(np.abs(a) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), a), a).astype(a.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_on_the_device_gives_the_records_result_with_the_flush_modelled(dtype):
    cp = available_cupy()
    y, dy = pairs(dtype)
    spec = BlobSpec(y.shape, np.dtype(dtype))
    ctx = KernelContext(cp, None, "relu_grad", "g", {}, (spec, spec), (spec,))
    got = cp.asnumpy(elementwise_kernels.relu_grad_kernel(ctx)(cp.asarray(y), cp.asarray(dy)))
    want = np.where(_flushed(y) > 0, dy, dy * 0)  # a passing dy is moved, its subnormals kept
    assert_bitwise(got, want)
