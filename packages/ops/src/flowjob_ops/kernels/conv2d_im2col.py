"""The GEMM operands of the 2-D im2col convolutions: the column matrix (``Im2Col``), the weights and the output
gradient as matrices (``WeightMatrix``, ``DyMatrix``) and the products (``Products``), each built once per graph
node into buffers it keeps or borrows (``Alloc``: a plan's ``KernelContext.scratch``).

The column matrix is built with a single copy from a strided window view of a zero-bordered padded input (only
its interior is rewritten per call), in one of two layouts picked by ``Im2Col.choose`` so that the copy moves
long contiguous runs:

* ``"rows"``: col (N*OH*OW, groups, kh*kw*Cg) from an NHWC padded input; a row's (kw, C) block is one contiguous
  run.  Best when C is large (LeNet conv2).
* ``"cols"``: col (groups, Cg*kh*kw, N*OH*OW) from an NCHW padded input; the runs are output rows of length OW.
  Best when C is small (LeNet conv1, C=1).

The strategy is chosen per kernel from the static shapes (``strategy=None``) and can be forced with
``strategy="rows"`` / ``"cols"``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from flowjob_core.backends.host_gemm import SplitMatmul

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry, check_shape, to_nchw, to_nhwc
from flowjob_ops.kernels.window2d import as_strided

ROWS = "rows"
COLS = "cols"

Alloc = Callable[[tuple, Any], Any]
"""``alloc(shape, dtype)``: memory a kernel needs only during one call (a plan's ``KernelContext.scratch``)."""
Parallel = Callable[[Callable[[int, int], None], int], None]
"""``parallel(body, count)``: ``body(lo, hi)`` over parts of ``range(count)`` on the host threads
(``Backend.parallel``)."""


def allocator(xp: Any, scratch: Optional[Alloc]) -> Alloc:
    """``scratch``, or memory of the kernel's own where none is given."""
    if scratch is not None:
        return scratch
    return lambda shape, dtype: xp.empty(shape, dtype=dtype)


class Products:
    """``products(a, b, out)``: out = a @ b, one BLAS call, or cut over the host threads where it is large
    (``parallel``: ``flowjob_core.backends.host_gemm``'s split, given where a plan holds BLAS to one thread)."""

    def __init__(self, xp: Any, parallel: Optional[Parallel]) -> None:
        self.xp, self.parallel = xp, parallel
        self._cut: dict[tuple, SplitMatmul] = {}

    def __call__(self, a: Any, b: Any, out: Any) -> Any:
        if self.parallel is None:
            return self.xp.matmul(a, b, out=out)
        key = (a.shape, b.shape)
        product = self._cut.get(key)
        if product is None:
            product = self._cut[key] = SplitMatmul(self.xp, a.shape, b.shape, self.parallel)
        return product(a, b, out)


def by_rows(body: Callable[[int, int], None], rows: int, parallel: Optional[Parallel]) -> None:
    """``body(lo, hi)`` over parts of ``range(rows)`` on ``parallel``, else once for all rows (an elementwise
    pass: the same bits however it is cut)."""
    if parallel is None or rows < 2:
        body(0, rows)
    else:
        parallel(body, rows)


class Im2Col:
    """Builds the im2col matrix of a conv input into a buffer allocated once.

    ``strategy`` is ``"rows"`` or ``"cols"`` (see the module docstring); None
    picks the one whose copy moves the longer contiguous runs.  ``mat`` is the
    column matrix of the last call: (M, groups, Kg) for rows with K ordered
    (kh, kw, Cg), (groups, Kg, M) for cols with K ordered (Cg, kh, kw).
    """

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, strategy: str | None = None,
                 *, ones_row: bool = False, tiles: tuple[int, int] | None = None, scratch: Optional[Alloc] = None,
                 pad_scratch: Optional[Alloc] = None, parallel: Optional[Parallel] = None):
        """``scratch``: the column matrix's memory (see ``Alloc``); ``pad_scratch``: the padded
        input's, whose border is then zeroed by every call (else it is zeroed once). ``parallel``
        (a ``Backend.parallel``): the copies run in parts over the batch on the host threads (copies:
        the same bits however they are cut)."""
        if strategy is None:
            strategy = self.choose(geom)
        if strategy not in (ROWS, COLS):
            raise ValueError(f"im2col strategy must be {ROWS!r} or {COLS!r}, got {strategy!r}")
        self.xp, self.geom, self.strategy = xp, geom, strategy
        self.dtype = np.dtype(dtype)
        self._parallel = parallel
        g, win = geom, geom.window
        kh, kw = win.ksize
        oh, ow = win.out_hw
        hp, wp = win.padded_hw
        self._layout = "NHWC" if strategy == ROWS else "NCHW"
        # Without padding, read x directly when it already is in the source
        # layout (or C == 1, where NCHW and NHWC coincide); else copy it once
        # per call into a zero-bordered buffer whose border is never rewritten.
        self._direct = not win.has_padding and (g.data_format == self._layout or g.C == 1)
        self._pad_buf = None
        self._interior = None
        self._border: list[Any] = []  # the padded input's frame, zeroed per call when it is scratch
        if not self._direct:
            hs, ws = win.interior
            padded = (g.N, hp, wp, g.C) if strategy == ROWS else (g.N, g.C, hp, wp)
            if pad_scratch is None:
                self._pad_buf = xp.zeros(padded, dtype=self.dtype)
            else:
                self._pad_buf = pad_scratch(padded, self.dtype)
            # (N, H, W, C) views of the padded buffer whatever its layout
            plane = self._pad_buf if strategy == ROWS else self._pad_buf.transpose(0, 2, 3, 1)
            self._interior = plane[:, hs, ws, :] if strategy == ROWS else self._pad_buf[:, :, hs, ws]
            if pad_scratch is not None:
                frame = [plane[:, : hs.start], plane[:, hs.stop:], plane[:, hs, : ws.start], plane[:, hs, ws.stop:]]
                self._border = [b for b in frame if b.size]
        # ``mat_ones`` (cols, one group): the column matrix with an extra row of ones,
        # written once, so that a GEMM against [w | b] adds the bias for free.
        self.mat_ones = None
        # ``tiles=(ph, pw)``: the M axis ordered (i, j, n, oh // ph, ow // pw) for output pixel
        # (n, oh // ph * ph + i, ow // pw * pw + j), so that the members of each non-overlapping
        # ph x pw tile lie in ph*pw contiguous blocks (pooling is then ph*pw - 1 contiguous maxima)
        self.tiles = tiles
        if tiles is not None:
            ph, pw = tiles
            if oh % ph or ow % pw:
                raise ValueError(f"tiles {tiles} do not divide the output size {(oh, ow)}")
            self._m_shape = (ph, pw, g.N, oh // ph, ow // pw)
        else:
            self._m_shape = (g.N, oh, ow)
        m_batch_axis = 0 if tiles is None else 2
        # the batch axis of ``col``: parts of the batch are copied apart
        self._col_batch_axis = m_batch_axis if strategy == ROWS else 4 + m_batch_axis
        alloc = allocator(xp, scratch)  # the matrix is rebuilt by every call
        if strategy == ROWS:
            self.col = alloc(self._m_shape + (g.groups, kh, kw, g.Cg), self.dtype)
            self.mat = self.col.reshape(g.M, g.groups, g.Kg)
        elif ones_row and g.groups == 1:
            raw = xp.empty((g.Kg + 1, g.M), dtype=self.dtype)
            raw[g.Kg] = 1
            self.col = raw[: g.Kg].reshape((1, g.Cg, kh, kw) + self._m_shape)
            self.mat = raw[None, : g.Kg]
            self.mat_ones = raw
        else:
            self.col = alloc((g.groups, g.Cg, kh, kw) + self._m_shape, self.dtype)
            self.mat = self.col.reshape(g.groups, g.Kg, g.M)

    @staticmethod
    def choose(geom: ConvGeometry) -> str:
        """Pick the layout whose im2col copy has the longer contiguous runs."""
        win = geom.window
        # rows: (kw, Cg) merges into one run only if taps are adjacent and groups == 1
        rows_run = geom.Cg * (win.ksize[1] if win.dilation[1] == 1 and geom.groups == 1 else 1)
        cols_run = win.out_hw[1] if win.strides[1] == 1 else 1
        return ROWS if rows_run >= cols_run else COLS

    def __call__(self, x: Any) -> Any:
        """Fill and return ``mat`` for input ``x`` (in the conv's data_format)."""
        g, win = self.geom, self.geom.window
        check_shape("conv2d input", x, g.x_shape)
        if self._layout == "NHWC":
            src = to_nhwc(x, g.data_format)
        else:
            src = to_nchw(x, g.data_format)
        unpadded = src
        if not self._direct:
            src = self._pad_buf
        kh, kw = win.ksize
        oh, ow = win.out_hw
        sh, sw = win.strides
        dh, dw = win.dilation
        G, Cg = g.groups, g.Cg
        if self.strategy == ROWS:
            s_n, s_h, s_w, s_c = src.strides
        else:
            s_n, s_c, s_h, s_w = src.strides
        if self.tiles is None:
            m_strides: tuple[int, ...] = (s_n, sh * s_h, sw * s_w)
        else:
            ph, pw = self.tiles
            m_strides = (sh * s_h, sw * s_w, s_n, ph * sh * s_h, pw * sw * s_w)
        if self.strategy == ROWS:
            view = as_strided(self.xp, src, self._m_shape + (G, kh, kw, Cg),
                              m_strides + (Cg * s_c, dh * s_h, dw * s_w, s_c))
        else:
            view = as_strided(self.xp, src, (G, Cg, kh, kw) + self._m_shape,
                              (Cg * s_c, s_c, dh * s_h, dw * s_w) + m_strides)
        before = (slice(None),) * self._col_batch_axis

        def fill(lo: int, hi: int) -> None:
            """Images lo..hi: padded (their border zeroed where it is scratch), then their columns."""
            images = slice(lo, hi)
            if not self._direct:
                for border in self._border:
                    border[images].fill(0)
                self._interior[images] = unpadded[images]
            self.col[before + (images,)] = view[before + (images,)]

        by_rows(fill, g.N, self._parallel)
        return self.mat


class WeightMatrix:
    """Presents w as an (F, Kg) matrix with K in a requested tap order.

    ``order`` is the weight layout whose flattening gives the wanted K order:
    "NHWC" -> (kh, kw, Cg), "NCHW" -> (Cg, kh, kw).  A contiguous w already in
    that layout is used as a view; otherwise it is repacked into a small buffer.
    """

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, order: str, *, bias_column: bool = False,
                 scratch: Optional[Alloc] = None):
        self.geom, self.order = geom, order
        kh, kw = geom.window.ksize
        shape = (geom.F, kh, kw, geom.Cg) if order == "NHWC" else (geom.F, geom.Cg, kh, kw)
        alloc = allocator(xp, scratch)  # both are written by every call that uses them
        self._buf = alloc(shape, np.dtype(dtype))
        self._aug = self._aug_w = None
        if bias_column:
            self._aug = alloc((geom.F, geom.Kg + 1), np.dtype(dtype))
            self._aug_w = self._aug[:, : geom.Kg].reshape(shape)  # a view: only the last axis is split
            if self._aug_w.base is None:  # pragma: no cover - numpy/cupy always give a view here
                raise AssertionError("weight view of the bias-augmented matrix is a copy")

    def with_bias(self, w: Any, b: Any) -> Any:
        """[w | b] as an (F, Kg + 1) matrix, for a column matrix with a row of ones (one group)."""
        g = self.geom
        check_shape("conv2d weight", w, g.w_shape)
        if self.order == g.data_format:
            self._aug_w[...] = w
        elif self.order == "NHWC":  # w is (F, Cg, kh, kw)
            self._aug_w[...] = w.transpose(0, 2, 3, 1)
        else:  # w is (F, kh, kw, Cg)
            self._aug_w[...] = w.transpose(0, 3, 1, 2)
        self._aug[:, g.Kg] = b
        return self._aug

    def __call__(self, w: Any) -> Any:
        g = self.geom
        check_shape("conv2d weight", w, g.w_shape)
        if self.order == g.data_format:
            if w.flags.c_contiguous:
                return w.reshape(g.F, g.Kg)
            self._buf[...] = w
        elif self.order == "NHWC":  # w is (F, Cg, kh, kw)
            self._buf[...] = w.transpose(0, 2, 3, 1)
        else:  # w is (F, kh, kw, Cg)
            self._buf[...] = w.transpose(0, 3, 1, 2)
        return self._buf.reshape(g.F, g.Kg)


class DyMatrix:
    """dy as a GEMM operand: (F, M) for ``want="fm"``, (M, F) for ``want="mf"``.

    M runs over (n, oh, ow).  NCHW dy is gathered to (F, N, OH*OW) for "fm"
    (a cheap copy of contiguous OH*OW blocks) or to NHWC for "mf"; a
    contiguous NHWC dy is used as a view.  Buffers are allocated once.
    """

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, want: str, *, scratch: Optional[Alloc] = None):
        self.xp, self.geom, self.want, self.dtype = xp, geom, want, np.dtype(dtype)
        oh, ow = geom.window.out_hw
        self._buf = None
        if geom.data_format == "NCHW":
            shape = (geom.F, geom.N, oh * ow) if want == "fm" else (geom.N, oh, ow, geom.F)
            self._buf = allocator(xp, scratch)(shape, self.dtype)

    def __call__(self, dy: Any) -> Any:
        g = self.geom
        check_shape("conv2d output gradient dy", dy, g.y_shape)
        oh, ow = g.window.out_hw
        if g.data_format == "NCHW":
            if self.want == "fm":
                self._buf[...] = dy.reshape(g.N, g.F, oh * ow).transpose(1, 0, 2)
                return self._buf.reshape(g.F, g.M)
            self._buf[...] = dy.transpose(0, 2, 3, 1)
            return self._buf.reshape(g.M, g.F)
        if not dy.flags.c_contiguous:
            if self._buf is None:  # rare (dy is normally a fresh contiguous array)
                self._buf = self.xp.empty(g.y_shape, dtype=self.dtype)
            self._buf[...] = dy
            dy = self._buf
        mf = dy.reshape(g.M, g.F)
        return mf.T if self.want == "fm" else mf
