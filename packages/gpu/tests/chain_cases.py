"""Chains for the generated-kernel tests, their operands (NaN, ±0, ±inf, subnormals among them), the
numpy chain kernel they are checked against, and the generated source placed in a standalone file:
a CUDA kernel with CuPy's element loop for nvcc (``__half`` for CuPy's float16), or a C++ function
for the host compiler (``_Float16``; the round-to-nearest intrinsics as the IEEE operations they are)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, KernelContext
from flowjob_gpu.c_expressions import C_TYPES
from flowjob_gpu.chain_source import ChainSource, chain_kernel
from flowjob_ops.records.fused import ELEMENTWISE_CHAIN, STEPS

RECORDS = {name: step.record for name, step in STEPS.items()}
FLOATS = ("float16", "float32", "float64")
SCALARS = {"scalar_add": 0.75, "scalar_rsub": 1.5, "scalar_div": 3.0, "scalar_rdiv": 0.7, "scalar_pow": 1.5,
           "scalar_mul": 0.1}
TRANSCENDENTAL = {"exp", "log", "tanh", "power"}  # CUDA's and numpy's differ by ulps


@dataclass(frozen=True)
class Case:
    """A chain: its steps, input shapes and dtypes, output dtype; ``later``: an op as a later step
    (after ``negative``), the form checked on the host only."""

    name: str
    steps: tuple
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    out: str
    later: bool = False

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(*self.shapes))

    @property
    def ufuncs(self) -> set[str]:
        return {RECORDS[op].elementwise.ufunc for op, _, _ in self.steps}  # type: ignore[union-attr]

    def kernel(self) -> Any:
        return chain_kernel(self.steps, self.dtypes, self.out, RECORDS)


def special(dtype: str) -> np.ndarray:
    """Values where numpy's ufuncs have rules: NaN, ±0, ±inf, ±1, a subnormal, the largest finite."""
    info = np.finfo(dtype)
    return np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 0.5, -2.5, info.smallest_subnormal,
                     info.max, 3.0], dtype)


def operands(case: Case, seed: int = 0) -> list[np.ndarray]:
    """Inputs of ``case``: a binary chain's first two inputs hold every pair of special values (both
    orders), the rest normal draws; bool inputs alternate."""
    rng = np.random.default_rng(seed)
    arrays = []
    for k, (shape, dtype) in enumerate(zip(case.shapes, case.dtypes)):
        if dtype == "bool":
            arrays.append(np.arange(int(np.prod(shape))).reshape(shape) % 3 == 0)
            continue
        a = (rng.standard_normal(shape) * 3).astype(dtype)
        flat = a.reshape(-1)
        values = special(dtype)
        if len(case.shapes) >= 2 and case.shapes[0] == case.shapes[1] == case.out_shape and k < 2:
            pairs = np.array(list(itertools.product(values, values)), dtype)[:, k]
            flat[:min(len(pairs), flat.size)] = pairs[:flat.size]
        else:
            flat[:min(len(values), flat.size)] = values[:flat.size]
        arrays.append(a)
    return arrays


def numpy_chain(case: Case, arrays: list[np.ndarray], xp: Any = np) -> np.ndarray:
    """The chain's result from flowjob_ops' xp kernel on numpy (the reference every backend matches)."""
    specs = tuple(BlobSpec(a.shape, a.dtype) for a in arrays)
    ctx = KernelContext(xp, None, "elementwise_chain", case.name, {"steps": case.steps}, specs,
                        (BlobSpec(case.out_shape, np.dtype(case.out)),))
    with np.errstate(all="ignore"):
        return ELEMENTWISE_CHAIN.kernel(ctx)(*arrays).copy()


def _flushed(value: Any) -> Any:
    """``value`` with its float32 subnormals as zeros of their sign, as a GPU reads and writes them."""
    if getattr(value, "dtype", None) != np.float32:
        return value
    tiny = np.finfo(np.float32).tiny
    return np.where((np.abs(value) < tiny) & (value != 0), np.copysign(np.float32(0), value), value).astype(
        np.float32)


class _FlushingNumpy:
    """numpy whose ufuncs read and write float32 subnormals as zeros: CuPy compiles every kernel, its own
    ufuncs included, with ``-ftz=true``, so single-precision subnormals flush on the device."""

    def __getattr__(self, name: str) -> Any:
        ufunc = getattr(np, name)
        if not isinstance(ufunc, np.ufunc):  # empty, for the output buffer
            return ufunc

        def call(*operands: Any, out: np.ndarray) -> np.ndarray:
            ufunc(*[_flushed(o) for o in operands], out=out)
            out[...] = _flushed(out)
            return out

        return call


def device_chain(case: Case, arrays: list[np.ndarray]) -> np.ndarray:
    """What the chain gives on a GPU: numpy's result with float32 subnormals flushed at every step."""
    return numpy_chain(case, [_flushed(a) for a in arrays], _FlushingNumpy())


def assert_chain_equal(case: Case, got: np.ndarray, want: np.ndarray) -> None:
    """Bitwise (NaN where numpy has NaN, the sign of every zero), or close for CUDA's exp/log/tanh/pow."""
    assert got.dtype == want.dtype and got.shape == want.shape, (case.name, got.dtype, got.shape)
    if case.ufuncs & TRANSCENDENTAL and want.dtype.kind == "f":
        rtol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-14}[want.dtype.name]
        atol = 2 * float(np.finfo(want.dtype).smallest_subnormal)  # an ulp apart among subnormals
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=case.name)
        return
    np.testing.assert_array_equal(got, want, err_msg=case.name)
    if want.dtype.kind == "f":
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                      err_msg=f"{case.name}: the sign of a zero")


def _op_cases(dtype: str) -> list[Case]:
    """Each built-in step op as step 0 and as a later step, the running value in each position."""
    cases = []
    shape = (12, 12)
    for op, step in sorted(STEPS.items()):
        attrs = {"scalar": SCALARS[op]} if op in SCALARS else {}
        result = "bool" if RECORDS[op].elementwise.ufunc in ("equal", "not_equal", "greater", "greater_equal",  # type: ignore[union-attr]
                                                             "less", "less_equal") else dtype
        if step.arity == 1:
            cases.append(Case(f"{op}_{dtype}", ((op, attrs, (0,)),), (shape,), (dtype,), result))
            if result == dtype:
                cases.append(Case(f"negative_{op}_{dtype}", (("negative", {}, (0,)), (op, attrs, (-1,))),
                                  (shape,), (dtype,), dtype, later=True))
            continue
        cases.append(Case(f"{op}_{dtype}", ((op, attrs, (0, 1)),), (shape, shape), (dtype, dtype), result))
        if result == dtype:
            for pos in ((-1, 1), (1, -1)):
                cases.append(Case(f"negative_{op}{pos}_{dtype}", (("negative", {}, (0,)), (op, attrs, pos)),
                                  (shape, shape), (dtype, dtype), dtype, later=True))
    return cases


def _mixed_cases(dtype: str) -> list[Case]:
    """Longer chains: scalars in both positions, a broadcast operand, a comparison then bools."""
    return [
        Case(f"dense_tail_{dtype}", (("scalar_mul", {"scalar": 2.0}, (0,)), ("add", {}, (-1, 1)),
                                     ("relu", {}, (-1,)), ("scalar_rsub", {"scalar": 1.0}, (-1,)),
                                     ("scalar_rdiv", {"scalar": 0.5}, (-1,)), ("sign", {}, (-1,))),
             ((6, 10), (10,)), (dtype, dtype), dtype),
        Case(f"broadcast_both_{dtype}", (("subtract", {}, (0, 1)), ("multiply", {}, (-1, 2)), ("exp", {}, (-1,)),
                                         ("maximum", {}, (1, -1)), ("minimum", {}, (-1, 0))),
             ((6, 10), (10,), (6, 1)), (dtype, dtype, dtype), dtype),
        Case(f"compare_{dtype}", (("greater", {}, (0, 1)), ("equal", {}, (-1, 2)), ("not_equal", {}, (2, -1))),
             ((6, 10), (6, 10), (6, 10)), (dtype, dtype, "bool"), "bool"),
    ]


CASES: list[Case] = [case for dtype in FLOATS for case in (*_op_cases(dtype), *_mixed_cases(dtype))]
DEVICE_CASES: list[Case] = [case for case in CASES if not case.later]
"""On a device, each op once per dtype and the longer chains: CuPy compiles each (NVRTC, a fraction of a
second); the later-step forms of every op are checked on the host (test_chain_compiles)."""


def _params(source: ChainSource) -> list[tuple[str, str]]:
    """(dtype, name) of each input parameter, then the output's."""
    return [tuple(p.split()) for p in (source.in_params + ", " + source.out_params).split(", ")]  # type: ignore[misc]


def cuda_kernel(source: ChainSource) -> str:
    """``source`` as a CUDA kernel with CuPy's element loop: array parameters ``_raw_<name>`` bound to
    ``<name>`` by reference each iteration, number parameters by value."""
    params, binds = [], []
    for dtype, name in _params(source):
        ctype = C_TYPES[dtype].storage
        if name.startswith("c"):
            params.append(f"const {ctype} {name}")
        elif name == "out":
            params.append(f"{ctype}* _raw_out")
            binds.append(f"{ctype} &out = _raw_out[i];")
        else:
            params.append(f"const {ctype}* _raw_{name}")
            binds.append(f"const {ctype} &{name} = _raw_{name}[i];")
    body = "\n    ".join([*binds, *source.operation.splitlines()])
    return (f'extern "C" __global__ void {source.name}({", ".join(params)}, long long n) {{\n'
            f"  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
            f"       i += (long long)blockDim.x * gridDim.x) {{\n    {body};\n  }}\n}}\n")


CUDA_PRELUDE = "#include <cuda_fp16.h>\ntypedef __half float16;  // CuPy's float16 converts as __half does\n"


def host_function(source: ChainSource) -> str:
    """``source`` as a host C++ function over contiguous, already broadcast arrays (numbers by pointer,
    for ctypes)."""
    params, binds = [], []
    for dtype, name in _params(source):
        ctype = C_TYPES[dtype].storage
        if name.startswith("c"):
            params.append(f"const {ctype}* _num_{name}")
            binds.append(f"const {ctype} {name} = *_num_{name};")
        elif name == "out":
            params.append(f"{ctype}* _raw_out")
        else:
            params.append(f"const {ctype}* _raw_{name}")
    loads = [f"const {C_TYPES[d].storage} &{n} = _raw_{n}[i];" for d, n in _params(source)
             if not n.startswith("c") and n != "out"]
    body = "\n    ".join([*loads, f"{C_TYPES[_params(source)[-1][0]].storage} &out = _raw_out[i];",
                          *source.operation.splitlines()])
    return (f'extern "C" void {source.name}({", ".join(params)}, long long n) {{\n  ' + "\n  ".join(binds)
            + f"\n  for (long long i = 0; i < n; ++i) {{\n    {body};\n  }}\n}}\n")


HOST_PRELUDE = """#include <cmath>
using std::isnan;
typedef _Float16 float16;
// CUDA's round-to-nearest intrinsics are the IEEE operations; on the host, one rounding each as well
#define __fadd_rn(a, b) ((float)(a) + (float)(b))
#define __fsub_rn(a, b) ((float)(a) - (float)(b))
#define __fmul_rn(a, b) ((float)(a) * (float)(b))
#define __fdiv_rn(a, b) ((float)(a) / (float)(b))
#define __frcp_rn(a) (1.0f / (float)(a))
#define __fsqrt_rn(a) std::sqrt((float)(a))
#define __dadd_rn(a, b) ((double)(a) + (double)(b))
#define __dsub_rn(a, b) ((double)(a) - (double)(b))
#define __dmul_rn(a, b) ((double)(a) * (double)(b))
#define __ddiv_rn(a, b) ((double)(a) / (double)(b))
#define __drcp_rn(a) (1.0 / (double)(a))
#define __dsqrt_rn(a) std::sqrt((double)(a))
"""
