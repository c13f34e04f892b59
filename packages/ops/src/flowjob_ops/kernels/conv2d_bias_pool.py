"""The fused ``conv2d_bias_pool`` (``Conv2dBiasPool``): max pooling taken straight from the convolution's GEMM
buffer, in its own layout, before the bias and ReLU, which then run at the pooled size. When the pooling windows
tile the plane, the im2col rows are put in tile order (``tiles=``) so that the pooling is a few maxima of
contiguous blocks.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_im2col import ROWS, Parallel
from flowjob_ops.kernels.pool import MaxPool, PoolGeometry
from flowjob_ops.kernels.window2d import Window2d
from flowjob_ops.kernels.winograd import WinogradForward


class Conv2dBiasPool:
    """y = max_pool(act(conv2d(x, w) + b)) with the pooling taken straight from the GEMM buffer.

    Max pooling commutes with adding a per-channel constant and with ReLU (both are monotone,
    and so is float rounding), so ``max_pool(relu(z + b)) == relu(max_pool(z) + b)`` exactly:
    the bias and the ReLU run at the pooled size, and the full-size activation is never
    written out in the graph's layout. Pooling reads the GEMM result in its own layout
    (NHWC for "rows", (F, N, OH, OW) for "cols" -- per-plane, so pooled as if NCHW).
    ``pool`` is ``(ksize, strides, pads)`` in the conv's data_format; ``max_pool`` the max-pooling
    kernel class used where the windows do not tile the plane (the cpu backend passes its
    blocked variant), by default the reference ``kernels.pool.MaxPool``.
    """

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, *, pool: tuple[Any, Any, Any], relu: bool = False,
                 strategy: str | None = None, algorithm: str = "im2col", max_pool: type | None = None,
                 parallel: Optional[Parallel] = None, products: Optional[Parallel] = None):
        """``parallel``: the convolution's copies (Winograd's chunks) and the pooling's blocks over the host
        threads (then ``max_pool`` must take ``parallel=``); ``products``: its GEMMs cut over them."""
        self.xp = xp
        g = self.geom = geom
        oh, ow = g.window.out_hw
        ksize, pstrides, ppads = pool
        self.relu = bool(relu)
        self._winograd = algorithm == "winograd"
        if algorithm not in ("im2col", "winograd"):
            raise ValueError(f"conv2d algorithm must be 'im2col' or 'winograd', got {algorithm!r}")
        if self._winograd:
            # the Winograd result is an (H', W', N, F) buffer: pooled as NHWC through a strided view
            self.conv = WinogradForward(xp, g, dtype, parallel=parallel)
            raw_shape, raw_fmt, self._raw_layout = (g.N, oh, ow, g.F), "NHWC", "NHWC"
        else:
            self.conv = Conv2dForward(xp, g, dtype,
                                      strategy=strategy, output=False, parallel=parallel, products=products)
            if self.conv.strategy == ROWS:
                raw_shape, raw_fmt, self._raw_layout = (g.N, oh, ow, g.F), "NHWC", "NHWC"
            else:
                raw_shape, raw_fmt, self._raw_layout = (g.F, g.N, oh, ow), "NCHW", "FNHW"
        # pads resolved in the conv's own data_format, then given explicitly ((t, b), (l, r))
        window = Window2d.create((oh, ow), ksize, pstrides, 1, ppads, g.data_format)
        self._tiled = window.tiles and not window.has_padding and not self._winograd
        if self._tiled:
            # GEMM rows/columns in tile order: the pooling is kh*kw - 1 maxima of contiguous blocks
            self.conv = Conv2dForward(xp, g, dtype,
                                      strategy=self.conv.strategy, output=False, tiles=window.ksize,
                                      parallel=parallel, products=products)
            self.pool = None
            ph, pw = window.out_hw
            T = window.ksize[0] * window.ksize[1]
            self._pooled = xp.empty((g.N * ph * pw, g.F) if raw_fmt == "NHWC" else (g.F, g.N * ph * pw),
                                    dtype=np.dtype(dtype))
            gemm = self.conv._gemm
            if raw_fmt == "NHWC":
                self._blocks = [b for b in gemm.reshape(T, g.N * ph * pw, g.F)]
                self._pooled4 = self._pooled.reshape(g.N, ph, pw, g.F)
            else:
                g3 = gemm.reshape(g.F, T, g.N * ph * pw)
                self._blocks = [g3[:, t] for t in range(T)]
                self._pooled4 = self._pooled.reshape(g.F, g.N, ph, pw)
        else:
            if max_pool is None:  # the reference pooling
                pool_geom = PoolGeometry(raw_shape, window.ksize, window.strides, window.pads, raw_fmt)
                self.pool = MaxPool(xp, pool_geom, dtype, xp.empty(pool_geom.y_shape, dtype=np.dtype(dtype)))
                pooled = pool_geom.y_shape
            else:
                self.pool = max_pool(xp, raw_shape, dtype, window.ksize, window.strides, window.pads, raw_fmt,
                                     **({"parallel": parallel} if parallel is not None else {}))
                pooled = self.pool.out_shape
            ph, pw = (pooled[1], pooled[2]) if raw_fmt == "NHWC" else (pooled[2], pooled[3])
        self.out_shape = (g.N, g.F, ph, pw) if g.data_format == "NCHW" else (g.N, ph, pw, g.F)
        self._y = xp.empty(self.out_shape, dtype=np.dtype(dtype))
        # the pooled raw result seen in y's layout
        if self._raw_layout == "NHWC":
            perm = (0, 3, 1, 2) if g.data_format == "NCHW" else (0, 1, 2, 3)
        else:
            perm = (1, 0, 2, 3) if g.data_format == "NCHW" else (1, 2, 3, 0)
        self._perm = perm
        self._bias_shape = (g.F, 1, 1) if g.data_format == "NCHW" else (g.F,)

    def __call__(self, x: Any, w: Any, b: Any) -> Any:
        xp, y = self.xp, self._y
        if tuple(b.shape) != (self.geom.F,):
            raise ValueError(f"conv2d bias must have shape ({self.geom.F},), got {tuple(b.shape)}")
        if self._winograd:
            raw = self.conv.raw(x, w)[: self.geom.window.out_hw[0], : self.geom.window.out_hw[1]].transpose(2, 0, 1, 3)
        else:
            raw, _ = self.conv.raw(x, w)
        if self._tiled:
            blocks, out = self._blocks, self._pooled
            xp.maximum(blocks[0], blocks[1], out=out) if len(blocks) > 1 else xp.copyto(out, blocks[0])
            for block in blocks[2:]:
                xp.maximum(out, block, out=out)
            pooled = self._pooled4.transpose(self._perm)
        else:
            pooled = self.pool(raw).transpose(self._perm)
        xp.add(pooled, b.reshape(self._bias_shape), out=y)
        if self.relu:
            xp.maximum(y, 0, out=y)
        return y
