"""The cpu backend's conv2d data gradient in parts over the batch: the same bits on any number of threads,
and the whole-batch kernel's values to float32 rounding."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core.backends.host_threads import HostThreads
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter
from flowjob_ops.overrides.cpu import batch_parts

GEOMETRIES = [  # x shape, w shape, options
    ((5, 3, 9, 9), (4, 3, 3, 3), {"pads": "SAME"}),
    ((4, 1, 12, 12), (8, 1, 5, 5), {"pads": "SAME"}),  # C=1: the cols strategy (GEMM + col2im)
    ((3, 6, 10, 10), (6, 3, 3, 3), {"strides": 2, "pads": "VALID", "groups": 2}),
    ((4, 8, 7, 7), (16, 8, 3, 3), {"pads": "SAME", "dilation": 2}),
    ((4, 9, 9, 3), (4, 3, 3, 3), {"pads": "SAME", "data_format": "NHWC"}),
]


@pytest.mark.parametrize("x_shape, w_shape, options", GEOMETRIES)
def test_batch_parts_give_the_same_bits_on_any_thread_count(monkeypatch, x_shape, w_shape, options):
    rng = np.random.default_rng(0)
    geom = ConvGeometry.create(x_shape, w_shape, **options)
    whole = Conv2dBackwardData(np, geom, np.float32)
    dy = rng.standard_normal(whole.geom.y_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    want = whole(dy, w).copy()
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        out = np.full(x_shape, np.nan, np.float32)
        split = batch_parts.BatchPartsDataGradient(np, geom, np.float32, batch_parts.parts(x_shape[0]),
                                                   HostThreads().split, out)
        for _ in range(2):  # the parts' padded buffers are zeroed on every call
            got = split(dy, w)
            assert got is out
        results.append(got.copy())
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-5)


def test_parts_cover_the_batch_in_near_equal_contiguous_runs():
    assert batch_parts.parts(5, 2) == [(0, 2), (2, 5)]
    assert batch_parts.parts(2) == [(0, 1), (1, 2)]
    assert batch_parts.parts(7, 1) == [(0, 7)]
    assert batch_parts.parts(100) == [(100 * i // 8, 100 * (i + 1) // 8) for i in range(8)]


def test_the_cpu_override_splits_a_large_data_gradient_only(monkeypatch):
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "im2col")  # the split is of the im2col kernel
    from flowjob_core import BlobSpec, KernelContext
    from flowjob_core.backends.numpy_backend import make_backend

    from flowjob_ops.overrides.cpu import conv as cpu_conv

    def kernel(batch: int) -> object:
        x_shape, w_shape = (batch, 32, 14, 14), (64, 32, 5, 5)
        attrs = {"x_shape": x_shape, "w_shape": w_shape, "padding": "SAME", "strides": 1}
        inputs = (BlobSpec((batch, 64, 14, 14), np.dtype(np.float32)), BlobSpec(w_shape, np.dtype(np.float32)))
        ctx = KernelContext(np, make_backend(), "conv2d_grad_data", "n", attrs, inputs,
                            (BlobSpec(x_shape, np.dtype(np.float32)),))
        return cpu_conv.grad_data_kernel(ctx)

    assert isinstance(kernel(16), batch_parts.BatchPartsDataGradient)  # LeNet's second convolution, 16 images
    assert not isinstance(kernel(1), batch_parts.BatchPartsDataGradient)  # one image: nothing to split


def _nan_scratch(shape: tuple, dtype) -> np.ndarray:
    """Scratch as a plan lends it: whatever an earlier node left there (NaN here)."""
    return np.full(shape, np.nan, dtype)


@pytest.mark.parametrize("x_shape, w_shape, options", GEOMETRIES)
@pytest.mark.parametrize("bias, relu, strided", [(False, False, False), (True, True, True), (True, False, False)])
def test_forward_copies_in_batch_parts_give_the_bits_of_one_thread(monkeypatch, x_shape, w_shape, options, bias,
                                                                   relu, strided):
    # the padding, im2col and epilogue copies run in parts over the batch; copies and maxima are exact
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    args = (x, w) + ((rng.standard_normal(w_shape[0]).astype(np.float32),) if bias else ())
    geom = ConvGeometry.create(x_shape, w_shape, **options)
    kwargs = dict(bias=bias, relu=relu, strided_output=strided, scratch=_nan_scratch)
    if strided:
        kwargs["out"] = np.empty(geom.y_shape, np.float32)
    want = Conv2dForward(np, geom, np.float32, **kwargs)(*args).copy()
    for threads in (2, 3):
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        kernel = Conv2dForward(np, geom, np.float32, **kwargs, parallel=HostThreads().split)
        for _ in range(2):  # the scratch-padded border is zeroed by every call
            np.testing.assert_array_equal(kernel(*args), want)


@pytest.mark.parametrize("x_shape, w_shape, options", GEOMETRIES)
def test_filter_gradient_in_batch_parts_gives_the_bits_of_one_thread(monkeypatch, x_shape, w_shape, options):
    # its im2col copies, and for C=1 NCHW its per-image GEMMs, run in parts over the batch
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape).astype(np.float32)
    geom = ConvGeometry.create(x_shape, w_shape, **options)
    whole = Conv2dBackwardFilter(np, geom, np.float32, scratch=_nan_scratch)
    dy = rng.standard_normal(whole.geom.y_shape).astype(np.float32)
    want = whole(x, dy).copy()
    for threads in (2, 3):
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        kernel = Conv2dBackwardFilter(np, geom, np.float32, scratch=_nan_scratch, parallel=HostThreads().split)
        for _ in range(2):
            np.testing.assert_array_equal(kernel(x, dy), want)
