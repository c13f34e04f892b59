"""A matrix product cut over the host threads (``flowjob_core.backends.host_gemm``): which products are cut and
how, the same bits as one call on any number of threads, and only where a plan holds BLAS to one thread."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from flowjob_core.backends.host_gemm import SplitMatmul, gemm_split, matmul_parts, operand_shape
from flowjob_core.backends.host_threads import HostThreads


def test_small_products_stay_whole_and_large_ones_cut_their_longer_side():
    assert matmul_parts((4, 8), (8, 4)) is None
    assert matmul_parts((512, 256), (256, 64)) == ("rows", 512)
    assert matmul_parts((64, 256), (256, 512)) == ("cols", 512)
    assert matmul_parts((8, 64, 128), (8, 128, 64)) == ("batch", 8)
    assert matmul_parts((64, 128), (8, 128, 64)) == ("batch", 8)  # a 1x1 convolution: W @ x[n] per image
    assert matmul_parts((8, 4096), (4096, 8)) is None  # long inner sum, nothing to cut out of 8 x 8
    assert operand_shape((3, 5, 7), True) == (3, 7, 5)


def _threaded(monkeypatch, threads: int):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
    return HostThreads().split


@pytest.mark.parametrize("shapes", [((300, 200), (200, 90)), ((40, 400), (400, 300)), ((5, 120, 140), (5, 140, 80)),
                                    ((5, 120, 140), (140, 80)), ((5, 120, 140), (1, 140, 80)),
                                    ((120, 140), (5, 140, 80))], ids=str)
@pytest.mark.parametrize("transposed_a", [False, True])
def test_a_cut_product_gives_the_products_values_run_after_run(monkeypatch, shapes, transposed_a):
    # one block per thread; against one whole call (or another thread count) BLAS may round a block's sums
    # differently in the last bit (its kernels depend on the block sizes): float32 tolerance there, and the same
    # bits every time on one thread count; a stacked product's entries are numpy's own calls: the same bits
    rng = np.random.default_rng(0)
    shape_a, shape_b = shapes
    a = rng.standard_normal(operand_shape(shape_a, transposed_a)).astype(np.float32)
    a = a.swapaxes(-1, -2) if transposed_a else a  # a transposed view, as the matmul kernel passes
    b = rng.standard_normal(shape_b).astype(np.float32)
    with threadpool_limits(1, user_api="blas"):  # as the plan's BLAS: one thread per caller
        want = np.matmul(a, b)
    how = matmul_parts(a.shape, b.shape)
    assert how is not None
    for threads in (2, 3):
        product = SplitMatmul(np, a.shape, b.shape, _threaded(monkeypatch, threads))
        out = np.full(want.shape, np.nan, np.float32)
        assert product(a, b, out) is out
        first = out.copy()
        product(a, b, out)
        np.testing.assert_array_equal(out, first)
        if how[0] == "batch":
            np.testing.assert_array_equal(out, want)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_products_are_cut_only_where_a_plan_holds_blas_to_one_thread(monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    host = HostThreads()
    backend = SimpleNamespace(lanes=host, host_arrays=True, parallel=host.split)
    host.blas.hold(True)
    assert gemm_split(backend) is None  # BLAS threads the product itself
    host.blas.hold(False)
    assert gemm_split(backend) == host.split
    assert gemm_split(SimpleNamespace(lanes=None, host_arrays=True, parallel=host.split)) is None
    assert gemm_split(SimpleNamespace(lanes=host, host_arrays=False, parallel=host.split)) is None  # a device
    host.blas.hold(True)
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "1")
    one = HostThreads()
    one.blas.hold(False)
    assert gemm_split(SimpleNamespace(lanes=one, host_arrays=True, parallel=one.split)) is None
