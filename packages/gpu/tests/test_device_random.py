"""The gpu backend's device random streams (flowjob_gpu.philox, flowjob_gpu.device_random): Philox4x32-10 gives
Random123's known answers; on the emulated CuPy dropout's masks are the documented stream's, the same recorded as
CUDA graphs or not, fresh at every replay, and the node is no live piece."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from flowjob_gpu import available_cupy, plugin
from flowjob_gpu.device_random import MASK_OPERATION, keep_threshold
from flowjob_gpu.philox import philox4x32_10, seed_key
from flowjob_gpu.step_graphs import GraphedStep

# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key) -> output
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,want", KNOWN_ANSWERS)
def test_philox_gives_random123s_known_answers_on_arrays_and_python_ints(counter, key, want):
    assert philox4x32_10(counter, key) == want
    words = philox4x32_10(tuple(np.array([c], np.uint64) for c in counter), key)
    assert [int(w[0]) for w in words] == list(want)


def test_a_seed_is_the_key_of_its_low_and_high_words():
    assert seed_key(3) == (3, 0) and seed_key((5 << 32) | 7) == (7, 5) and seed_key(-1) == (0xFFFFFFFF,) * 2


def _expected_keep(seed: int, draw: int, size: int, rate: float) -> np.ndarray:
    """The documented stream, on numpy: element i takes word i % 4 of block i // 4 of counter (block, draw, 0)."""
    blocks = np.arange(-(-size // 4), dtype=np.uint64)
    words = philox4x32_10((blocks, np.uint64(draw & 0xFFFFFFFF), np.uint64(draw >> 32), 0), seed_key(seed))
    flat = np.stack(words, axis=1).reshape(-1)[:size]
    return (flat >> 8) > keep_threshold(rate)


def test_the_keep_threshold_keeps_a_draw_above_the_rate():
    assert keep_threshold(0.5) == 1 << 23 and keep_threshold(0.0) == 0
    k = np.arange(1 << 24)
    assert np.array_equal(k > keep_threshold(0.3), k / 2.0 ** 24 > 0.3)


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.delenv("FLOWJOB_DEVICE", raising=False)
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _masks(steps: int, seed: int | None = 11) -> tuple[list[np.ndarray], list[np.ndarray], object]:
    """Dropout's masks over ``steps`` calls of a train job, random_mask_like's (still the CPU's stream, drawn on the
    host) and its plan's step."""
    import oneflow as flow
    import oneflow.typing as tp
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((6, 7))) -> tp.Numpy:
        w = flow.get_variable("w", (6, 7), initializer=flow.ones_initializer())
        y = flow.nn.dropout(x * w, rate=0.3, seed=seed)
        kept = flow.nn.random_mask_like(x, rate=0.6, seed=None if seed is None else seed + 1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.0]), momentum=0).minimize(
            flow.math.reduce_sum(y))
        return flow.concat([y, flow.cast(kept, flow.float)], axis=1)

    x = np.ones((6, 7), np.float32)
    outs = [train(x) for _ in range(steps)]
    step = train.plan().step
    flow.clear_default_session()
    return [o[:, :7] for o in outs], [o[:, 7:] for o in outs], step


def test_dropout_masks_are_the_documented_stream_recorded_or_not_and_fresh_every_replay(emulation, monkeypatch):
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    plain_y, plain_kept, plain_step = _masks(5)
    assert not isinstance(plain_step, GraphedStep)
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "1")
    ys, kept, step = _masks(5)
    assert isinstance(step, GraphedStep) and step.recorded
    live = step.live_nodes()
    assert not any("(dropout)" in n for n in live) and any("(random_mask_like)" in n for n in live), live
    for draw in range(5):
        want = np.where(_expected_keep(11, draw, 42, 0.3).reshape(6, 7), np.float32(1 / 0.7), 0)
        np.testing.assert_array_equal(ys[draw], want)
        np.testing.assert_array_equal(plain_y[draw], want)
        np.testing.assert_array_equal(kept[draw], plain_kept[draw])  # the host's stream, live beside the graphs
    # each replay (calls 3 to 5) draws a mask of its own
    assert len({m.tobytes() for m in ys}) == 5 and len({m.tobytes() for m in kept}) == 5


def test_without_a_seed_each_session_draws_its_own_masks(emulation):
    first, _, _ = _masks(2, seed=None)
    second, _, _ = _masks(2, seed=None)
    assert not np.array_equal(first[0], second[0])
    assert 0.4 < np.mean(np.concatenate(first + second) > 0) < 0.95  # kept with probability 0.7


HOST_WRAPPER = """
typedef float T;
extern "C" void keep_mask(long long n, const unsigned long long* draws, unsigned long long k0, unsigned long long k1,
                          unsigned long long threshold, T scale, T* out) {
  for (long long i = 0; i < n; ++i) { T mask; %s
    out[i] = mask; }
}
"""

DEVICE_WRAPPER = """
typedef float T;
extern "C" __global__ void keep_mask(long long n, const unsigned long long* draws, unsigned long long k0,
                                     unsigned long long k1, unsigned long long threshold, T scale, T* out) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T mask; %s
  out[i] = mask;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler: the mask kernel's C is not run")
def test_the_mask_kernels_c_gives_the_array_forms_masks(tmp_path):
    """The ElementwiseKernel body CuPy compiles (the rounds written as C by the code that runs them as arrays),
    run on the host: the documented stream's masks, a draw count past 2**32 included."""
    source = tmp_path / "keep_mask.cpp"
    source.write_text(HOST_WRAPPER % MASK_OPERATION)
    library = tmp_path / "keep_mask.so"
    done = subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    keep_mask = ctypes.CDLL(str(library)).keep_mask
    u64 = ctypes.c_ulonglong
    keep_mask.argtypes = [ctypes.c_longlong, ctypes.c_void_p, u64, u64, u64, ctypes.c_float, ctypes.c_void_p]
    for seed, draw, size, rate in [(11, 0, 42, 0.3), (12, 3, 37, 0.6), ((7 << 32) | 5, (1 << 32) + 9, 1001, 0.5)]:
        draws = np.array([draw], np.uint64)
        out = np.full(size, -1, np.float32)
        k0, k1 = seed_key(seed)
        scale = np.float32(1 / (1 - rate))
        keep_mask(size, draws.ctypes.data, k0, k1, keep_threshold(rate), scale, out.ctypes.data)
        np.testing.assert_array_equal(out, np.where(_expected_keep(seed, draw, size, rate), scale, np.float32(0)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: the mask kernel is not compiled")
def test_the_mask_kernel_compiles_to_ptx(tmp_path):
    source = tmp_path / "keep_mask.cu"
    source.write_text(DEVICE_WRAPPER % MASK_OPERATION)
    done = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-o", str(tmp_path / "keep_mask.ptx"), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert ".entry keep_mask" in (tmp_path / "keep_mask.ptx").read_text()


@pytest.mark.gpu
def test_on_the_device_the_mask_kernel_draws_the_documented_stream():
    from flowjob_core import BlobSpec, Kernel, KernelContext
    from flowjob_gpu.device_random import dropout_kernel
    cp = available_cupy()
    spec = BlobSpec((6, 7), np.dtype(np.float32))
    outs = [cp.empty((6, 7), np.float32), cp.empty((6, 7), np.float32)]
    ctx = KernelContext(cp, None, "dropout", "d", {"rate": 0.3, "seed": 11}, (spec,), (spec, spec), "train",
                        _out_buffer=lambda k: outs[k])
    run = dropout_kernel(ctx)
    assert isinstance(run, Kernel) and run.host_state is False
    for draw in range(3):
        y, mask = run(cp.ones((6, 7), np.float32))
        want = np.where(_expected_keep(11, draw, 42, 0.3).reshape(6, 7), np.float32(1 / 0.7), 0)
        np.testing.assert_array_equal(cp.asnumpy(mask), want)
        np.testing.assert_array_equal(cp.asnumpy(y), want)
