"""The cpu backend's override of ``optim_sgd_matmul_update`` (one BLAS ``?gemm``) against the
record's reference kernel (``matmul`` then the update), the ``FLOWJOB_BLAS_FUSION`` switch, and
``fused_sgd_available``: the optim-fusion pass fuses only where the backend's kernel says it runs
the update as one call."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from flowjob_core import Backend, BlobSpec, KernelContext
from flowjob_optim import _blas, cpu
from flowjob_optim.update_ops import SGD_MATMUL_UPDATE, fused_sgd_available

SHAPES = [((5, 7), (7, 4)), ((1, 3), (3, 1)), ((33, 17), (17, 65))]


def _context(w: np.ndarray, a: np.ndarray, b: np.ndarray, lr: np.ndarray, attrs: dict) -> KernelContext:
    specs = tuple(BlobSpec(v.shape, v.dtype) for v in (w, a, b, lr))
    return KernelContext(np, None, SGD_MATMUL_UPDATE.name, "update", attrs, specs, ())


def _operands(m_k: tuple, k_n: tuple, ta: bool, tb: bool, dtype: Any, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    (m, k), (_, n) = m_k, k_n
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    return rng.standard_normal((m, n)).astype(dtype), a, b, np.array([0.25], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_the_override_matches_the_reference_kernel(dtype: Any, shapes: tuple, ta: bool, tb: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWJOB_BLAS_FUSION", raising=False)
    w, a, b, lr = _operands(*shapes, ta, tb, dtype, seed=len(shapes[0]) + 2 * ta + tb)
    attrs = {"transpose_a": ta, "transpose_b": tb, "grad_scale": 0.125}
    builder = cpu.KERNEL_BUILDERS[SGD_MATMUL_UPDATE.name]
    assert builder.fuses(dtype) == (_blas.gemm(dtype) is not None)
    got, want = w.copy(), w.copy()
    for _ in range(2):  # the kernels are made once and called every step
        builder(_context(w, a, b, lr, attrs))(got, a, b, lr)
        SGD_MATMUL_UPDATE.kernel(_context(w, a, b, lr, attrs))(want, a, b, lr)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    grad = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(got, w - 2 * 0.25 * 0.125 * grad.astype(np.float64), rtol=tol * 10, atol=tol * 10)


def test_the_switch_turns_the_gemm_off(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = cpu.KERNEL_BUILDERS[SGD_MATMUL_UPDATE.name]
    w, a, b, lr = _operands((4, 3), (3, 2), False, False, np.float32, seed=1)
    ctx = _context(w, a, b, lr, {})
    monkeypatch.setenv("FLOWJOB_BLAS_FUSION", "0")
    assert not builder.fuses(np.float32)
    kernel = builder(ctx)
    assert kernel.__qualname__ == SGD_MATMUL_UPDATE.kernel(ctx).__qualname__  # the reference's update
    monkeypatch.setenv("FLOWJOB_BLAS_FUSION", "1")
    if _blas.gemm(np.float32) is not None:
        assert builder.fuses(np.float32)
        assert builder(ctx).__qualname__.startswith("BlasSgdMatmulUpdate")


def test_only_a_backend_whose_kernel_fuses_gets_the_fused_node(session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWJOB_BLAS_FUSION", raising=False)
    registries = session.registries
    cpu_backend = registries.backends.get("cpu")
    other = Backend(tag="xpu", name="numpy under another tag", xp=np)
    assert set(registries.kernels.overrides("cpu")) == set(cpu.KERNEL_BUILDERS)  # the BLAS SGD, the blocked updates
    assert SGD_MATMUL_UPDATE.name in cpu.KERNEL_BUILDERS
    has_blas = _blas.gemm(np.float32) is not None
    assert fused_sgd_available(registries, cpu_backend, np.dtype(np.float32)) == has_blas
    assert not fused_sgd_available(registries, other, np.dtype(np.float32))  # the reference kernel there
    assert not fused_sgd_available(registries, cpu_backend, np.dtype(np.float16))  # no half-precision gemm
    monkeypatch.setenv("FLOWJOB_BLAS_FUSION", "0")
    assert not fused_sgd_available(registries, cpu_backend, np.dtype(np.float32))
    monkeypatch.delenv("FLOWJOB_BLAS_FUSION")
    registries.kernels.remove(SGD_MATMUL_UPDATE.name, "cpu")  # a registry without the override
    assert not fused_sgd_available(registries, cpu_backend, np.dtype(np.float32))
