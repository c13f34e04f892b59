"""The 2-D convolution's filter gradient by im2col (``Conv2dBackwardFilter``): one GEMM per group of dy
against the column matrix, which a forward kernel of the same input may lend (``im2col=``).

Each kernel is built once per graph node from a ``ConvGeometry`` (shapes are static): ``__init__`` allocates the
output and all large temporaries, ``__call__`` only copies into them and runs GEMMs with ``out=``, and returns the
*same* output array on every call (callers copy a value they need beyond the next call). In a plan the kernels take
``out=`` (the node's planned output buffer) and ``scratch=`` (``KernelContext.scratch``: memory needed only during
one call); without them every buffer is the kernel's own.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry, check_shape
from flowjob_ops.kernels.conv2d_im2col import (COLS, ROWS, Alloc, DyMatrix, Im2Col, Parallel, Products, allocator,
                                               by_rows)


class Conv2dBackwardFilter:
    """dw = d(loss)/dw from x and dy: one GEMM per group against the im2col matrix.

    Pass ``im2col=forward.im2col`` to share the forward kernel's column buffer;
    then ``__call__(x, dy, reuse_cols=True)`` skips rebuilding it, which is
    valid only if that buffer was last filled from this same ``x`` (i.e. the
    forward kernel ran on ``x`` and nothing refilled it since).

    ``out``: dw's buffer, else the kernel's own; ``scratch``: temporaries (see ``Alloc``),
    its own column matrix among them.
    """

    def __init__(
        self,
        xp: Any,
        geom: ConvGeometry,
        dtype: Any,
        *,
        strategy: str | None = None,
        im2col: Im2Col | None = None,
        out: Any = None,
        scratch: Optional[Alloc] = None,
        parallel: Optional[Parallel] = None,
        products: Optional[Parallel] = None,
    ):
        """``parallel``: the copies and per-image products in parts over the batch; ``products``: the GEMMs cut
        over the host threads (``flowjob_core.backends.host_gemm``, where a plan holds BLAS to one thread)."""
        self.xp = xp
        self._parallel = parallel
        self._matmul = Products(xp, products)
        alloc = allocator(xp, scratch)
        self.geom = g = geom
        dt = np.dtype(dtype)
        if im2col is not None:
            if im2col.geom != g or im2col.dtype != dt:
                raise ValueError("shared im2col was built for a different convolution or dtype")
            if strategy is not None and strategy != im2col.strategy:
                raise ValueError(f"strategy {strategy!r} conflicts with the shared im2col's {im2col.strategy!r}")
        self.im2col = im2col if im2col is not None else Im2Col(xp, g, dt, strategy, scratch=scratch,
                                                               pad_scratch=scratch, parallel=parallel)
        self.strategy = self.im2col.strategy
        self.out_shape = g.w_shape
        if out is not None:
            check_shape("conv2d filter gradient buffer", out, self.out_shape)
        self._dw = out if out is not None else xp.empty(self.out_shape, dtype=dt)
        kh, kw = g.window.ksize
        G, Fg, Cg, Kg = g.groups, g.Fg, g.Cg, g.Kg
        self._fsl = [slice(k * Fg, (k + 1) * Fg) for k in range(G)]
        self._fix: tuple[Any, Any] | None = None
        mat = self.im2col.mat
        if self.strategy == ROWS:
            # dw_g (Fg, Kg) = dy_g.T (Fg, M) @ col_g (M, Kg); K order (kh, kw, Cg)
            # is the NHWC weight layout.
            if g.data_format == "NHWC":
                dw_mat = self._dw.reshape(g.F, Kg)
            else:
                dw_mat = alloc((g.F, Kg), dt)
                self._fix = (self._dw, dw_mat.reshape(g.F, kh, kw, Cg).transpose(0, 3, 1, 2))
            self._gemms = [(mat[:, k, :], dw_mat[fs]) for k, fs in enumerate(self._fsl)]
        else:
            # dw_g.T (Kg, Fg) = col_g (Kg, M) @ dy_g (M, Fg): with the long M axis
            # contiguous in col this orientation measured 2-3x faster than
            # dy_g.T @ col_g.T for small F and K.  K order is (Cg, kh, kw).
            dwt = alloc((G, Kg, Fg), dt)
            if g.data_format == "NCHW":
                src = dwt.transpose(0, 2, 1)
            else:
                src = dwt.reshape(G, Cg, kh, kw, Fg).transpose(0, 4, 2, 3, 1)
            self._fix = (self._dw.reshape(src.shape), src)
            self._gemms = [(mat[k], dwt[k]) for k in range(G)]
        self._dy = DyMatrix(xp, g, dt, "fm", scratch=scratch)
        # cols, NCHW, one group: per image dy[n] (F, P) @ col[:, n].T (P, K), then a sum over images --
        # reads dy in place instead of regathering it as (F, N*P) (measured 2x faster on LeNet's conv1)
        self._per_image = None
        if self.strategy == COLS and g.data_format == "NCHW" and g.groups == 1 and self.im2col.tiles is None:
            oh, ow = g.window.out_hw
            self._per_image = (alloc((g.N, g.F, Kg), dt), mat[0].reshape(Kg, g.N, oh * ow).transpose(1, 2, 0),
                               self._dw.reshape(g.F, Kg))

    def __call__(self, x: Any, dy: Any, *, reuse_cols: bool = False) -> Any:
        """Return dw (the kernel's own buffer, overwritten by the next call)."""
        xp = self.xp
        if not reuse_cols:
            self.im2col(x)
        dyt = None
        if self._per_image is not None:
            g = self.geom
            check_shape("conv2d output gradient dy", dy, g.y_shape)
            fnp = dy.reshape(g.N, g.F, -1).transpose(1, 0, 2)
            if fnp.flags.c_contiguous:  # dy laid out (F, N, P) in memory: it is the (F, M) operand
                dyt = fnp.reshape(g.F, g.M)
            else:
                partial, cols, dw = self._per_image
                dy3 = dy.reshape(g.N, g.F, -1)
                # one GEMM per image, the images in parts over the host threads (each image's product is
                # the same however the batch is cut)
                by_rows(lambda lo, hi: xp.matmul(dy3[lo:hi], cols[lo:hi], out=partial[lo:hi]), g.N,
                         self._parallel)
                xp.sum(partial, axis=0, out=dw)
                return self._dw
        if dyt is None:
            dyt = self._dy(dy)  # (F, M)
        rows = self.strategy == ROWS
        matmul = self._matmul
        for (col, out), fs in zip(self._gemms, self._fsl):
            if rows:
                matmul(dyt[fs], col, out)  # (Fg, M) @ (M, Kg)
            else:
                matmul(col, dyt[fs].T, out)  # (Kg, M) @ (M, Fg)
        if self._fix is not None:
            dst, src = self._fix
            dst[...] = src
        return self._dw
