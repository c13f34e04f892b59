"""The 2-D convolution forward by im2col + one GEMM per group (``Conv2dForward``): the cpu backend's 2-D
convolution (``flowjob_ops.overrides.cpu.conv``) and the kernel of the fused ``conv2d_bias`` on every backend; the
convolution ops' reference of any rank is ``kernels.conv``.

Each kernel is built once per graph node from a ``ConvGeometry`` (shapes are static): ``__init__`` allocates the
output and all large temporaries, ``__call__`` only copies into them and runs GEMMs with ``out=``, and returns the
*same* output array on every call (callers copy a value they need beyond the next call). In a plan the kernels take
``out=`` (the node's planned output buffer) and ``scratch=`` (``KernelContext.scratch``: memory needed only during
one call); without them every buffer is the kernel's own. What must outlive a call stays the kernel's own either
way: the column matrix (the filter gradient reuses it), the zero-bordered padded input (its border is never
rewritten) and a column matrix with a row of ones.

Fused form (made by the fusion pass, flowjob_ops.passes.fuse_conv): ``Conv2dForward(bias=True, relu=...)`` adds
the bias and applies the ReLU as the GEMM's epilogue (for "cols" with one group the bias rides in the GEMM: a row
of ones in the column matrix against a bias column in the weights).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry, check_shape, to_nchw
from flowjob_ops.kernels.conv2d_im2col import ROWS, Alloc, Im2Col, Parallel, Products, WeightMatrix, allocator, by_rows


class Conv2dForward:
    """y = conv2d(x, w) via im2col + one GEMM per group into preallocated buffers.

    With ``bias=True`` the call takes ``(x, w, b)`` and adds b (F,) per output channel;
    with ``relu=True`` it then applies max(., 0). Both run as an epilogue of the GEMM:
    for "cols" with one group the bias rides in the GEMM (a row of ones in the column
    matrix against a bias column in the weights), otherwise it is one contiguous pass over
    the GEMM result; the ReLU is applied while the result is moved into y's layout (or in
    place when the GEMM wrote y directly). Same values as conv2d -> bias_add -> relu.

    ``strided_output=True`` skips that layout pass: y is then a strided view of the GEMM
    buffer in y's shape (the graph's kernels take strided inputs).

    ``out``: y's memory (a contiguous array of y's shape; with ``strided_output`` the GEMM
    result is laid into its bytes); ``scratch``: temporaries (see ``Alloc``), the column matrix
    among them only with ``scratch_columns=True`` (no filter gradient reuses it).
    """

    def __init__(
        self,
        xp: Any,
        geom: ConvGeometry,
        dtype: Any,
        *,
        strategy: str | None = None,
        bias: bool = False,
        relu: bool = False,
        output: bool = True,
        tiles: tuple[int, int] | None = None,
        strided_output: bool = False,
        out: Any = None,
        scratch: Optional[Alloc] = None,
        scratch_columns: bool = False,
        parallel: Optional[Parallel] = None,
        products: Optional[Parallel] = None,
    ):
        """``parallel``: the copies in parts over the batch; ``products``: the GEMMs cut over the host threads
        (``flowjob_core.backends.host_gemm``, where a plan holds BLAS to one thread)."""
        self.xp = xp
        self.geom = g = geom
        self.bias, self.relu = bool(bias), bool(relu)
        self._parallel = parallel
        self._matmul = Products(xp, products)
        alloc = allocator(xp, scratch)
        self._has_output = bool(output)
        if tiles is not None and output:
            raise ValueError("a tile-ordered GEMM (tiles=...) is only for raw() (output=False)")
        if strategy is None:
            strategy = Im2Col.choose(g)
        self.im2col = Im2Col(xp, g, dtype, strategy, ones_row=self.bias, tiles=tiles,
                             scratch=scratch if scratch_columns else None, pad_scratch=scratch, parallel=parallel)
        self.strategy = self.im2col.strategy
        self._bias_in_gemm = self.im2col.mat_ones is not None
        self.out_shape = g.y_shape
        # output=False: only raw() is used (a fused consumer reads the GEMM buffer); y gets no memory
        if out is not None and output:
            check_shape("conv2d output buffer", out, self.out_shape)
            self._y = out
        else:
            self._y = xp.empty(self.out_shape if output else (0,), dtype=np.dtype(dtype))

        def gemm_buffer(shape: tuple[int, int]) -> Any:
            """The GEMM result when it is not y itself: y's memory when y becomes a strided view
            of it, else a temporary that one layout pass copies into y."""
            if strided_output and out is not None:
                return out.reshape(-1).reshape(shape)
            return alloc(shape, self._y.dtype)
        oh, ow = g.window.out_hw
        P = oh * ow
        Fg = g.Fg
        fsl = [slice(k * Fg, (k + 1) * Fg) for k in range(g.groups)]
        self._fsl = fsl
        # The GEMM result comes out NHWC-ordered (M, F) for rows and as (F, M)
        # for cols; write it straight into y when that is y's layout, else into
        # a buffer followed by one layout pass (dst, src views precomputed).
        self._fix: tuple[Any, Any] | None = None
        if self.strategy == ROWS:
            self._w = WeightMatrix(xp, g, dtype, "NHWC", scratch=scratch)
            if not output:
                gemm = xp.empty((g.M, g.F), dtype=self._y.dtype)
            elif g.data_format == "NHWC":
                gemm = self._y.reshape(g.M, g.F)
            else:
                gemm = gemm_buffer((g.M, g.F))
                self._fix = (self._y.reshape(g.N, g.F, P), gemm.reshape(g.N, P, g.F).transpose(0, 2, 1))
            self._outs = [gemm[:, s] for s in fsl]
            self._lhs = [self.im2col.mat[:, k, :] for k in range(g.groups)]
            self._bias_shape = (g.F,)
        else:
            self._w = WeightMatrix(xp, g, dtype, "NCHW", bias_column=self._bias_in_gemm, scratch=scratch)
            if not output:
                gemm = xp.empty((g.F, g.M), dtype=self._y.dtype)
            elif g.data_format == "NCHW" and g.N == 1:
                gemm = self._y.reshape(g.F, g.M)
            else:
                gemm = gemm_buffer((g.F, g.M))
                if g.data_format == "NCHW":
                    self._fix = (self._y.reshape(g.N, g.F, P), gemm.reshape(g.F, g.N, P).transpose(1, 0, 2))
                else:
                    self._fix = (self._y.reshape(g.M, g.F), gemm.T)
            self._outs = [gemm[s] for s in fsl]
            self._rhs = [self.im2col.mat[k] for k in range(g.groups)]
            self._bias_shape = (g.F, 1)
        self._gemm = gemm
        self._out = self._relu_target = self._y
        if strided_output and self._fix is not None:
            # y as a strided view of the GEMM buffer: no layout pass (consumers read strided arrays)
            if self.strategy == ROWS:
                self._out = to_nchw(gemm.reshape(g.N, oh, ow, g.F), "NHWC")
            else:
                fnhw = gemm.reshape(g.F, g.N, oh, ow)
                self._out = fnhw.transpose(1, 0, 2, 3) if g.data_format == "NCHW" else fnhw.transpose(1, 2, 3, 0)
            self._y = xp.empty((0,), dtype=self._y.dtype)
            self._relu_target = gemm
            self._fix = None

    def raw(self, x: Any, w: Any) -> tuple[Any, str]:
        """conv(x, w) without bias and layout pass: the GEMM buffer as a 4-d view and its layout.

        "NHWC" for rows, (N, OH, OW, F); "FNHW" for cols, (F, N, OH, OW). Only for a kernel
        built without bias (the bias may ride in the GEMM otherwise); overwritten by the next call.
        """
        if self.bias:
            raise ValueError("raw() needs a kernel built without bias")
        g = self.geom
        self.im2col(x)
        wm = self._w(w)
        if self.strategy == ROWS:
            for lhs, fs, out in zip(self._lhs, self._fsl, self._outs):
                self._matmul(lhs, wm[fs].T, out)
        else:
            for rhs, fs, out in zip(self._rhs, self._fsl, self._outs):
                self._matmul(wm[fs], rhs, out)
        m_shape = self.im2col._m_shape  # (N, OH, OW), or tile-ordered (ph, pw, N, OH/ph, OW/pw)
        if self.strategy == ROWS:
            return self._gemm.reshape(m_shape + (g.F,)), "NHWC"
        return self._gemm.reshape((g.F,) + m_shape), "FNHW"

    def __call__(self, x: Any, w: Any, b: Any = None) -> Any:
        """Return y (the kernel's own buffer, overwritten by the next call)."""
        xp = self.xp
        if self.bias:
            if b is None or tuple(b.shape) != (self.geom.F,):
                raise ValueError(f"conv2d bias must have shape ({self.geom.F},), got "
                                 f"{None if b is None else tuple(b.shape)}")
        elif b is not None:
            raise ValueError("this conv2d kernel was built without a bias")
        if not self._has_output:
            raise ValueError("this conv2d kernel was built with output=False; use raw()")
        self.im2col(x)
        matmul = self._matmul
        if self._bias_in_gemm:
            # y.T = [w | b] (F, Kg+1) @ [col; 1] (Kg+1, M)
            matmul(self._w.with_bias(w, b), self.im2col.mat_ones, self._outs[0])
        else:
            wm = self._w(w)
            if self.strategy == ROWS:
                # y[:, group] = col_g (M, Kg) @ w_g.T (Kg, Fg)
                for lhs, fs, out in zip(self._lhs, self._fsl, self._outs):
                    matmul(lhs, wm[fs].T, out)
            else:
                # y.T[group] = w_g (Fg, Kg) @ col_g (Kg, M)
                for rhs, fs, out in zip(self._rhs, self._fsl, self._outs):
                    matmul(wm[fs], rhs, out)
            if self.bias:
                gemm = self._gemm
                xp.add(gemm, b.reshape(self._bias_shape), out=gemm)
        if self._fix is not None:
            dst, src = self._fix
            if self.relu:
                by_rows(lambda lo, hi: xp.maximum(src[lo:hi], 0, out=dst[lo:hi]), len(dst), self._parallel)
            else:
                by_rows(lambda lo, hi: xp.copyto(dst[lo:hi], src[lo:hi]), len(dst), self._parallel)
        elif self.relu:
            target = self._relu_target
            by_rows(lambda lo, hi: xp.maximum(target[lo:hi], 0, out=target[lo:hi]), len(target), self._parallel)
        return self._out
