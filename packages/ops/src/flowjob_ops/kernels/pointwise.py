"""1x1 convolutions on NCHW blobs as batched matrix products, with no im2col and no layout copies.

A 1x1 convolution without padding, dilation or groups is, per image n, y[n] (F, P) = W (F, C) @
x[n] (C, P) with P the output pixels, and NCHW already stores x[n] as that (C, P) matrix. So the
forward is one ``matmul`` over the batch (BLAS per image), the data gradient dx[n] = W.T @ dy[n],
and the filter gradient dW = sum over n of dy[n] @ x[n].T. Where a plan holds BLAS to one thread
(``products``, see ``flowjob_core.backends.host_gemm``) the images run in parts over the host threads,
and the filter gradient in a block of W's rows per thread, each summed over every image in order. The general
im2col kernels instead copy x into an NHWC column matrix (kept until the filter gradient) and copy the
GEMM result back to NCHW. With a stride, the strided pixels are first gathered into a contiguous (N, C, OH, OW)
buffer; the data gradient writes into the strided positions of a dx whose other pixels stay zero.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from flowjob_core.backends.host_gemm import GEMM_PARTS

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_im2col import Alloc, Parallel, allocator


def applicable(geom: ConvGeometry) -> bool:
    """Whether this convolution is a plain 1x1 one on NCHW (the only case these kernels take)."""
    win = geom.window
    return (win.ksize == (1, 1) and not win.has_padding and geom.groups == 1
            and geom.data_format == "NCHW")


class _Pixels:
    """x (N, C, H, W) as the (N, C, P) stack of matrices the products read: a view when the
    stride is 1, else the strided pixels gathered into a buffer (``alloc``'s when given)."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, alloc: Optional[Alloc] = None) -> None:
        oh, ow = geom.window.out_hw
        self.strides = geom.window.strides
        self.shape = (geom.N, geom.C, oh * ow)
        self._gathered = None
        if self.strides != (1, 1):
            self._gathered = allocator(xp, alloc)((geom.N, geom.C, oh, ow), np.dtype(dtype))

    def __call__(self, x: Any) -> Any:
        if self._gathered is None:
            return x.reshape(self.shape)
        sh, sw = self.strides
        oh, ow = self._gathered.shape[2:]
        self._gathered[...] = x[:, :, : (oh - 1) * sh + 1: sh, : (ow - 1) * sw + 1: sw]
        return self._gathered.reshape(self.shape)


class PointwiseForward:
    """y = conv2d(x, w) (+ bias, then ReLU, for ``conv2d_bias``): one batched product into y.

    ``out``: y's buffer (a plan's planned output), else the kernel's own; ``scratch``: see ``Alloc``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, *, bias: bool = False, relu: bool = False,
                 out: Any = None, scratch: Optional[Alloc] = None, products: Optional[Parallel] = None) -> None:
        self.xp, self.geom = xp, geom
        self.bias, self.relu = bias, relu
        self._products = products
        self._pixels = _Pixels(xp, geom, dtype, scratch)
        self._y = out if out is not None else xp.empty(geom.y_shape, dtype=np.dtype(dtype))
        self._y3 = self._y.reshape(geom.N, geom.F, -1)

    def __call__(self, x: Any, w: Any, b: Any = None) -> Any:
        xp, g = self.xp, self.geom
        pixels, w2, y3 = self._pixels(x), w.reshape(g.F, g.C), self._y3
        bias = b.reshape(g.F, 1) if self.bias else None

        def images(lo: int, hi: int) -> None:
            part = y3[lo:hi]
            xp.matmul(w2, pixels[lo:hi], out=part)
            if bias is not None:
                xp.add(part, bias, out=part)
            if self.relu:
                xp.maximum(part, 0, out=part)

        if self._products is None:
            images(0, g.N)
        else:
            self._products(images, g.N)
        return self._y


class PointwiseBackwardData:
    """dx = W.T @ dy per image, written into dx's (strided) pixels.

    ``out``: dx's buffer for stride 1, where the product writes every pixel (with a stride the
    pixels no window reads must stay zero, so dx is the kernel's own); ``scratch``: see ``Alloc``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, *, out: Any = None,
                 scratch: Optional[Alloc] = None, products: Optional[Parallel] = None) -> None:
        self.xp, self.geom = xp, geom
        self._products_over = products
        oh, ow = geom.window.out_hw
        sh, sw = geom.window.strides
        if (sh, sw) == (1, 1) and out is not None:
            self._dx = out
        else:
            self._dx = xp.zeros(geom.x_shape, dtype=np.dtype(dtype))  # pixels no window reads stay zero
        if (sh, sw) == (1, 1):
            self._products, self._place = self._dx.reshape(geom.N, geom.C, -1), None
        else:
            self._products = allocator(xp, scratch)((geom.N, geom.C, oh * ow), np.dtype(dtype))
            self._place = (self._dx[:, :, : (oh - 1) * sh + 1: sh, : (ow - 1) * sw + 1: sw],
                           self._products.reshape(geom.N, geom.C, oh, ow))

    def __call__(self, dy: Any, w: Any) -> Any:
        g, xp = self.geom, self.xp
        wt, dy3, products = w.reshape(g.F, g.C).T, dy.reshape(g.N, g.F, -1), self._products

        def images(lo: int, hi: int) -> None:
            xp.matmul(wt, dy3[lo:hi], out=products[lo:hi])
            if self._place is not None:
                strided, placed = self._place
                strided[lo:hi] = placed[lo:hi]

        if self._products_over is None:
            images(0, g.N)
        else:
            self._products_over(images, g.N)
        return self._dx


class PointwiseBackwardFilter:
    """dW = sum over images of dy[n] @ x[n].T, accumulated image by image (no (N, F, C) stack).

    ``out``: dW's buffer, else the kernel's own; ``scratch``: see ``Alloc``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, *, out: Any = None,
                 scratch: Optional[Alloc] = None, products: Optional[Parallel] = None) -> None:
        self.xp, self.geom = xp, geom
        alloc = allocator(xp, scratch)
        self._pixels = _Pixels(xp, geom, dtype, alloc)
        self._dw = out if out is not None else xp.empty(geom.w_shape, dtype=np.dtype(dtype))
        self._dw2 = self._dw.reshape(geom.F, geom.C)
        self._term = alloc((geom.F, geom.C), np.dtype(dtype))
        # a block of W's rows per host thread: each block sums every image in order
        self._products = products if products is not None and geom.F >= 4 * GEMM_PARTS else None

    def __call__(self, x: Any, dy: Any) -> Any:
        xp, g = self.xp, self.geom
        pixels, dy3 = self._pixels(x), dy.reshape(g.N, g.F, -1)

        def rows(lo: int, hi: int) -> None:
            fs = slice(lo, hi)
            dw, term = self._dw2[fs], self._term[fs]
            xp.matmul(dy3[0, fs], pixels[0].T, out=dw)
            for n in range(1, g.N):
                xp.matmul(dy3[n, fs], pixels[n].T, out=term)
                xp.add(dw, term, out=dw)

        if self._products is None:
            rows(0, g.F)
        else:
            self._products(rows, g.F)
        return self._dw
