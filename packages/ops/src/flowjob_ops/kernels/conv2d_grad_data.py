"""The 2-D convolution's data gradient (``Conv2dBackwardData``): dy against the weights, tap by tap into a
padded dx ("rows") or one GEMM then col2im ("cols"); also the forward of ``deconv2d``.

Each kernel is built once per graph node from a ``ConvGeometry`` (shapes are static): ``__init__`` allocates the
output and all large temporaries, ``__call__`` only copies into them and runs GEMMs with ``out=``, and returns the
*same* output array on every call (callers copy a value they need beyond the next call). In a plan the kernels take
``out=`` (the node's planned output buffer) and ``scratch=`` (``KernelContext.scratch``: memory needed only during
one call); without them every buffer is the kernel's own.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry, check_shape, to_nchw, to_nhwc
from flowjob_ops.kernels.conv2d_im2col import COLS, ROWS, Alloc, DyMatrix, Im2Col, WeightMatrix, allocator


class Conv2dBackwardData:
    """dx = d(loss)/dx from dy and w, accumulated into a padded dx buffer.

    Two strategies (``strategy=None`` picks like ``Im2Col.choose``):

    * ``"rows"`` (large C): per tap (i, j), ``tmp (M, C) = dy (M, F) @ w_tap (F, C)``
      (block diagonal over groups), added into the strided slice of a padded
      NHWC dx that the tap read in the forward pass.  The per-tap temporary
      stays in cache, which beats one big GEMM + col2im for large C.
    * ``"cols"`` (small C, e.g. C=1): one GEMM per group
      ``dcol (Kg, M) = w_g.T (Kg, Fg) @ dy_g (Fg, M)``, then col2im: each row of
      dcol is a contiguous (N, OH, OW) block added into a padded NCHW dx.

    Strides, dilation and padding only change the slices; pixels that no
    window reads get zero.

    ``out``: dx's buffer, else the kernel's own; ``scratch``: temporaries (see ``Alloc``), the
    padded dx among them (every call zeroes it first).
    """

    def __init__(
        self,
        xp: Any,
        geom: ConvGeometry,
        dtype: Any,
        *,
        strategy: str | None = None,
        out: Any = None,
        scratch: Optional[Alloc] = None,
    ):
        self.xp = xp
        self.geom = g = geom
        alloc = allocator(xp, scratch)
        if strategy is None:
            strategy = Im2Col.choose(g)
        if strategy not in (ROWS, COLS):
            raise ValueError(f"conv2d backward-data strategy must be {ROWS!r} or {COLS!r}, got {strategy!r}")
        self.strategy = strategy
        win = g.window
        dt = np.dtype(dtype)
        kh, kw = win.ksize
        oh, ow = win.out_hw
        hp, wp = win.padded_hw
        G, Fg, Cg = g.groups, g.Fg, g.Cg
        self.out_shape = g.x_shape
        self._fsl = [slice(k * Fg, (k + 1) * Fg) for k in range(G)]
        layout = "NHWC" if strategy == ROWS else "NCHW"
        hs, ws = win.interior
        if out is not None:
            check_shape("conv2d data gradient buffer", out, self.out_shape)
        padded = (g.N, hp, wp, g.C) if layout == "NHWC" else (g.N, g.C, hp, wp)
        is_dx = g.data_format == layout and not win.has_padding  # the padded buffer *is* dx
        if is_dx:
            self._dxpad = out if out is not None else xp.empty(padded, dtype=dt)
        else:
            self._dxpad = alloc(padded, dt)
        interior = self._dxpad[:, hs, ws, :] if layout == "NHWC" else self._dxpad[:, :, hs, ws]
        self._fix: tuple[Any, Any] | None = None
        if is_dx:
            self._dx = self._dxpad
        else:
            self._dx = out if out is not None else xp.empty(self.out_shape, dtype=dt)
            dst = to_nhwc(self._dx, g.data_format) if layout == "NHWC" else to_nchw(self._dx, g.data_format)
            self._fix = (dst, interior)
        self._dy = DyMatrix(xp, g, dt, "mf" if strategy == ROWS else "fm", scratch=scratch)
        if strategy == ROWS:
            # Taps' weights packed as (kh, kw, G, Fg, Cg): each GEMM operand is contiguous.
            self._wt = alloc((kh, kw, G, Fg, Cg), dt)
            self._tmp = alloc((g.M, g.C), dt)
            self._tmp4 = self._tmp.reshape(g.N, oh, ow, g.C)
            self._tmp_outs = [self._tmp[:, k * Cg:(k + 1) * Cg] for k in range(G)]
            self._taps = [self._dxpad[:, a, b, :] for i, j in win.taps() for a, b in [win.tap(i, j)]]
        else:
            self._w = WeightMatrix(xp, g, dt, "NCHW", scratch=scratch)  # (F, Kg), K ordered (Cg, kh, kw)
            self._dcol = alloc((G, g.Kg, g.M), dt)
            dcol6 = self._dcol.reshape(g.C, kh, kw, g.N, oh, ow)
            self._col2im = [
                (self._dxpad[:, :, a, b], dcol6[:, i, j].transpose(1, 0, 2, 3))
                for i, j in win.taps()
                for a, b in [win.tap(i, j)]
            ]

    def __call__(self, dy: Any, w: Any) -> Any:
        """Return dx (the kernel's own buffer, overwritten by the next call)."""
        if self.strategy == ROWS:
            self._per_tap(dy, w)
        else:
            self._gemm_col2im(dy, w)
        if self._fix is not None:
            dst, src = self._fix
            dst[...] = src
        return self._dx

    def _per_tap(self, dy: Any, w: Any) -> None:
        xp, g = self.xp, self.geom
        check_shape("conv2d weight", w, g.w_shape)
        G, Fg, Cg = g.groups, g.Fg, g.Cg
        kh, kw = g.window.ksize
        if g.data_format == "NCHW":  # (G, Fg, Cg, kh, kw) -> (kh, kw, G, Fg, Cg)
            self._wt[...] = w.reshape(G, Fg, Cg, kh, kw).transpose(3, 4, 0, 1, 2)
        else:  # (G, Fg, kh, kw, Cg) -> (kh, kw, G, Fg, Cg)
            self._wt[...] = w.reshape(G, Fg, kh, kw, Cg).transpose(2, 3, 0, 1, 4)
        dy2 = self._dy(dy)
        lhs = [dy2[:, fs] for fs in self._fsl]
        self._dxpad.fill(0)
        for (i, j), dst in zip(g.window.taps(), self._taps):
            for k in range(G):
                xp.matmul(lhs[k], self._wt[i, j, k], out=self._tmp_outs[k])
            xp.add(dst, self._tmp4, out=dst)

    def _gemm_col2im(self, dy: Any, w: Any) -> None:
        xp = self.xp
        wm = self._w(w)
        dyt = self._dy(dy)
        for k, fs in enumerate(self._fsl):
            xp.matmul(wm[fs].T, dyt[fs], out=self._dcol[k])
        self._dxpad.fill(0)
        for dst, src in self._col2im:
            xp.add(dst, src, out=dst)
