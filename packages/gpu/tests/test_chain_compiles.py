"""The generated chain sources as compilers see them, no GPU needed: with nvcc, every case (each ufunc
template in float16, float32 and float64, as step 0 and as a later step) compiles to PTX inside CuPy's
element loop, and chains without exp/log/tanh/pow hold no fused multiply-add; with a host C++
compiler, the same sources run on the host give numpy's chain results bit for bit (NaN, the signs
of zeros, float16's rounding after every step), CUDA's round-to-nearest intrinsics taken as the IEEE
operations they are."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

cases = sibling(__file__, "chain_cases")
NVCC = shutil.which("nvcc")
CXX = shutil.which("g++") or shutil.which("clang++")


def _sources() -> dict:
    return {c.kernel().source.name: c.kernel().source for c in cases.CASES}


def _entry_bodies(ptx: str) -> dict[str, str]:
    """PTX entry name -> its body (up to the closing brace at the start of a line)."""
    return dict(re.findall(r"^\s*(?:\.visible\s+)?\.entry\s+(\w+)\s*\((.*?)^\}", ptx, re.MULTILINE | re.DOTALL))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: the generated chains are not compiled to PTX")
def test_every_case_compiles_to_ptx_in_cupys_element_loop(tmp_path):
    sources = _sources()
    cu = tmp_path / "chains.cu"
    cu.write_text(cases.CUDA_PRELUDE + "\n".join(cases.cuda_kernel(s) for s in sources.values()))
    ptx = tmp_path / "chains.ptx"
    done = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-o", str(ptx), str(cu)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"nvcc -ptx failed:\n{done.stderr[-4000:]}"
    bodies = _entry_bodies(Path(ptx).read_text())
    assert set(bodies) == set(sources)
    contracted = [c.name for c in cases.CASES if not c.ufuncs & cases.TRANSCENDENTAL
                  and "fma" in bodies[c.kernel().source.name]]
    assert not contracted, f"steps rounded once each must not be fused into an FMA: {contracted}"


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    """Every case's source compiled on the host into one shared library (skipped without a C++ compiler
    that has _Float16, as g++ 12 and clang 15 on x86-64 and arm64 do)."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++ or clang++) on PATH")
    folder = tmp_path_factory.mktemp("host_chains")
    probe = folder / "probe.cpp"
    probe.write_text("_Float16 half(float x) { return (_Float16)x; }\n")
    if subprocess.run([CXX, "-c", "-o", str(folder / "probe.o"), str(probe)], capture_output=True).returncode:
        pytest.skip(f"{CXX} has no _Float16")
    cpp = folder / "chains.cpp"
    cpp.write_text(cases.HOST_PRELUDE + "\n".join(cases.host_function(s) for s in _sources().values()))
    lib = folder / "chains.so"
    # no contraction and no fast math: each C operation rounds once, as each CUDA intrinsic does
    done = subprocess.run([CXX, "-O1", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-o", str(lib),
                           str(cpp)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{CXX} failed:\n{done.stderr[-4000:]}"
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_the_source_run_on_the_host_gives_numpys_chain_result(case, host_library):
    kernel = case.kernel()
    arrays = cases.operands(case)
    want = cases.numpy_chain(case, arrays)
    # CuPy broadcasts the arguments of an ElementwiseKernel; the host function takes them broadcast
    inputs = [np.ascontiguousarray(np.broadcast_to(a, case.out_shape)) for a in arrays]
    numbers = [np.array([c]) for c in kernel.constants]
    out = np.empty(case.out_shape, case.out)
    args = [ctypes.c_void_p(a.ctypes.data) for a in (*inputs, *numbers, out)]
    getattr(host_library, kernel.source.name)(*args, ctypes.c_longlong(out.size))
    cases.assert_chain_equal(case, out, want)
