"""1x1 NCHW convolutions as batched matrix products (flowjob_ops.kernels.pointwise): the same values
as the im2col reference kernels, chosen automatically on the cpu backend, overridable by the switch."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_ops.overrides.cpu import conv as cpu_conv
from flowjob_ops.kernels import pointwise
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter

SHAPES = [  # x shape, filters, strides, padding
    ((2, 8, 7, 9), 5, 1, "VALID"),
    ((3, 16, 14, 14), 32, 2, "SAME"),
    ((1, 4, 9, 8), 6, 3, "VALID"),
    ((2, 3, 5, 5), 7, (2, 1), "VALID"),
]


def _geom(x_shape, filters, strides, padding):
    return ConvGeometry.create(x_shape, (filters, x_shape[1], 1, 1), strides, padding, 1, 1, "NCHW")


@pytest.mark.parametrize("x_shape, filters, strides, padding", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pointwise_kernels_match_the_im2col_reference(x_shape, filters, strides, padding, dtype):
    rng = np.random.default_rng(4)
    geom = _geom(x_shape, filters, strides, padding)
    assert pointwise.applicable(geom)
    x = rng.normal(size=x_shape).astype(dtype)
    w = rng.normal(size=geom.w_shape).astype(dtype)
    b = rng.normal(size=(filters,)).astype(dtype)
    dy = rng.normal(size=geom.y_shape).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    want = Conv2dForward(np, geom, dtype)(x, w)
    np.testing.assert_allclose(pointwise.PointwiseForward(np, geom, dtype)(x, w), want, **tol)
    fused = pointwise.PointwiseForward(np, geom, dtype, bias=True, relu=True)(x, w, b)
    np.testing.assert_allclose(fused, np.maximum(want + b.reshape(1, -1, 1, 1), 0), **tol)
    data = pointwise.PointwiseBackwardData(np, geom, dtype)
    np.testing.assert_allclose(data(dy, w), Conv2dBackwardData(np, geom, dtype)(dy, w),
                               **tol)
    np.testing.assert_allclose(data(dy, w), Conv2dBackwardData(np, geom, dtype)(dy, w),
                               **tol)  # a second call: the pixels no window reads are still zero
    filt = pointwise.PointwiseBackwardFilter(np, geom, dtype)
    np.testing.assert_allclose(filt(x, dy), Conv2dBackwardFilter(np, geom, dtype)(x, dy),
                               **tol)


def test_strided_views_as_inputs():
    rng = np.random.default_rng(9)
    geom = _geom((2, 6, 5, 5), 4, 1, "VALID")
    x = rng.normal(size=(2, 5, 5, 6)).astype(np.float32).transpose(0, 3, 1, 2)  # NCHW view of NHWC memory
    w = rng.normal(size=(4, 6, 1, 1)).astype(np.float32)
    dy = rng.normal(size=(2, 5, 5, 4)).astype(np.float32).transpose(0, 3, 1, 2)
    want_y = np.einsum("fc,nchw->nfhw", w[:, :, 0, 0], x)
    np.testing.assert_allclose(pointwise.PointwiseForward(np, geom, np.float32)(x, w), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pointwise.PointwiseBackwardData(np, geom, np.float32)(dy, w),
                               np.einsum("fc,nfhw->nchw", w[:, :, 0, 0], dy), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pointwise.PointwiseBackwardFilter(np, geom, np.float32)(x, dy)[:, :, 0, 0],
                               np.einsum("nfhw,nchw->fc", dy, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, applies", [
    (((2, 8, 7, 7), (4, 8, 1, 1), 1, "VALID", 1, 1, "NCHW"), True),
    (((2, 8, 7, 7), (4, 8, 1, 1), 2, "SAME", 1, 1, "NCHW"), True),
    (((2, 8, 7, 7), (4, 8, 1, 1), 1, [[0, 0], [0, 0], [1, 1], [1, 1]], 1, 1, "NCHW"), False),  # padded
    (((2, 8, 7, 7), (4, 4, 1, 1), 1, "VALID", 1, 2, "NCHW"), False),  # grouped
    (((2, 7, 7, 8), (4, 1, 1, 8), 1, "VALID", 1, 1, "NHWC"), False),
    (((2, 8, 7, 7), (4, 8, 3, 3), 1, "SAME", 1, 1, "NCHW"), False),
])
def test_where_the_pointwise_path_applies(args, applies, monkeypatch):
    monkeypatch.delenv("FLOWJOB_CONV_ALGORITHM", raising=False)
    geom = ConvGeometry.create(*args)
    assert pointwise.applicable(geom) == applies
    assert (cpu_conv.algorithm(geom) == "pointwise") == applies
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "im2col")
    assert cpu_conv.algorithm(geom) == "im2col"


@pytest.mark.parametrize("x_shape, filters, strides, padding", SHAPES + [((4, 16, 6, 6), 40, 1, "VALID")])
def test_products_over_the_host_threads_give_the_whole_batch_values(monkeypatch, x_shape, filters, strides, padding):
    # images in parts (forward, data gradient: one product per image either way) and, with 32 filters or more,
    # a block of W's rows per thread summed over every image in order (the filter gradient)
    from flowjob_core.backends.host_threads import HostThreads

    rng = np.random.default_rng(5)
    geom = _geom(x_shape, filters, strides, padding)
    x = rng.normal(size=x_shape).astype(np.float32)
    w = rng.normal(size=geom.w_shape).astype(np.float32)
    b = rng.normal(size=(filters,)).astype(np.float32)
    dy = rng.normal(size=geom.y_shape).astype(np.float32)

    def run(products):
        forward = pointwise.PointwiseForward(np, geom, np.float32, bias=True, relu=True, products=products)
        return (forward(x, w, b).copy(),
                pointwise.PointwiseBackwardData(np, geom, np.float32, products=products)(dy, w).copy(),
                pointwise.PointwiseBackwardFilter(np, geom, np.float32, products=products)(x, dy).copy())

    whole = run(None)
    for threads in (2, 3):
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        cut = run(HostThreads().split)
        for got, want in zip(cut[:2], whole[:2]):
            np.testing.assert_array_equal(got, want)  # per image the very products of the whole batch
        # a block of W's rows per thread: BLAS may round a block's sums apart from the whole rows' in the last bit
        np.testing.assert_allclose(cut[2], whole[2], rtol=1e-5, atol=1e-5)
