"""2-D convolution kernels for numpy / cupy: forward, grad w.r.t. filter, grad w.r.t. data: the cpu
backend's 2-D convolutions (``flowjob_ops.overrides.cpu.conv``) and the kernels of the 2-D-only ops
(``conv2d_bias``, ``conv2d_bias_pool``, ``deconv2d``) on every backend; the convolution ops' reference of any
rank is ``kernels.conv``.

Layouts (legacy OneFlow):

* ``data_format="NCHW"``: x (N, C, H, W), w (F, C/groups, kh, kw), y (N, F, OH, OW)
* ``data_format="NHWC"``: x (N, H, W, C), w (F, kh, kw, C/groups), y (N, OH, OW, F)

Each kernel is built once per graph node (shapes are static): ``__init__``
allocates the output and all large temporaries, ``__call__`` only copies into
them and runs GEMMs with ``out=``, and returns the *same* output array on every
call (callers copy a value they need beyond the next call).

The forward and filter-gradient kernels use im2col + one GEMM per group.  The
column matrix is built with a single copy from a strided window view of a
zero-bordered padded input (only its interior is rewritten per call), in one of
two layouts picked by ``Im2Col.choose`` so that the copy moves long contiguous
runs:

* ``"rows"``: col (N*OH*OW, groups, kh*kw*Cg) from an NHWC padded input; a
  row's (kw, C) block is one contiguous run.  Best when C is large (LeNet conv2).
* ``"cols"``: col (groups, Cg*kh*kw, N*OH*OW) from an NCHW padded input; the
  runs are output rows of length OW.  Best when C is small (LeNet conv1, C=1).

The data-gradient kernel follows the same choice: for "rows" one small GEMM
per tap, ``dy (M, F) @ w_tap (F, C)``, added into a shifted strided slice of a
padded NHWC dx (the per-tap temporary stays in cache, which beats one big GEMM
+ col2im for large C); for "cols" one GEMM ``w.T @ dy`` into a column matrix
whose rows are contiguous (N, OH, OW) blocks, then col2im adds.

The strategy is chosen per kernel from the static shapes (``strategy=None``)
and can be forced with ``strategy="rows"`` / ``"cols"``.

In a plan the kernels take ``out=`` (the node's planned output buffer, which the planner
shares among values of disjoint lifetimes) and ``scratch=`` (``KernelContext.scratch``: memory
needed only during one call, lent by the plan). Without them every buffer is the kernel's own.
What must outlive a call stays the kernel's own either way: the forward's column matrix (the
filter gradient reuses it), the zero-bordered padded input (its border is never rewritten) and
a column matrix with a row of ones.

Fused forms (made by the fusion pass, flowjob_ops.passes.fuse_conv): ``Conv2dForward(bias=True,
relu=...)`` adds the bias and applies the ReLU as the GEMM's epilogue (for "cols" with one
group the bias rides in the GEMM: a row of ones in the column matrix against a bias column
in the weights), and ``Conv2dBiasPool`` max-pools the GEMM result in its own layout before
the bias and ReLU, which then run at the pooled size. When the pooling windows tile the
plane, the im2col rows are put in tile order (``tiles=``) so that the pooling is a few
maxima of contiguous blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from flowjob_core.backends.host_gemm import SplitMatmul

from .padding import Window2d, as_strided, check_data_format
from .pool import MaxPool, PoolGeometry
from .winograd import WinogradForward

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


@dataclass(frozen=True)
class ConvGeometry:
    """Static shapes of one convolution (validated)."""

    data_format: str
    N: int
    C: int
    H: int
    W: int
    F: int
    groups: int
    window: Window2d

    @classmethod
    def create(
        cls,
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        strides: Any,
        pads: Any,
        dilation: Any,
        groups: int,
        data_format: str,
    ) -> "ConvGeometry":
        fmt = check_data_format(data_format)
        if len(x_shape) != 4:
            raise ValueError(f"conv2d input must be 4-d ({fmt}), got shape {tuple(x_shape)}")
        if len(w_shape) != 4:
            raise ValueError(f"conv2d weight must be 4-d, got shape {tuple(w_shape)}")
        if fmt == "NCHW":
            N, C, H, W = (int(v) for v in x_shape)
            F, wc, kh, kw = (int(v) for v in w_shape)
        else:
            N, H, W, C = (int(v) for v in x_shape)
            F, kh, kw, wc = (int(v) for v in w_shape)
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise ValueError(f"groups must be a positive int, got {groups!r}")
        if C % groups or F % groups:
            raise ValueError(
                f"groups={groups} must divide both the input channels ({C}) and the "
                f"number of filters ({F})"
            )
        if wc != C // groups:
            raise ValueError(
                f"weight shape {tuple(w_shape)} ({fmt}) has {wc} input channels per "
                f"filter, expected C/groups = {C}/{groups} = {C // groups}"
            )
        if min(N, C, H, W, F, kh, kw) < 1:
            raise ValueError(
                f"conv2d shapes must be positive, got x {tuple(x_shape)}, w {tuple(w_shape)}"
            )
        window = Window2d.create((H, W), (kh, kw), strides, dilation, pads, fmt)
        return cls(fmt, N, C, H, W, F, int(groups), window)

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Fg(self) -> int:
        return self.F // self.groups

    @property
    def M(self) -> int:
        """GEMM rows: one per output pixel."""
        oh, ow = self.window.out_hw
        return self.N * oh * ow

    @property
    def Kg(self) -> int:
        """GEMM reduction length per group."""
        kh, kw = self.window.ksize
        return self.Cg * kh * kw

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        return self._act(self.C, (self.H, self.W))

    @property
    def y_shape(self) -> tuple[int, int, int, int]:
        return self._act(self.F, self.window.out_hw)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        kh, kw = self.window.ksize
        if self.data_format == "NCHW":
            return (self.F, self.Cg, kh, kw)
        return (self.F, kh, kw, self.Cg)

    def _act(self, c: int, hw: tuple[int, int]) -> tuple[int, int, int, int]:
        if self.data_format == "NCHW":
            return (self.N, c, hw[0], hw[1])
        return (self.N, hw[0], hw[1], c)


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


def _by_rows(body: Callable[[int, int], None], rows: int, parallel: Optional[Parallel]) -> None:
    """``body(lo, hi)`` over parts of ``range(rows)`` on ``parallel``, else once for all rows (an elementwise
    pass: the same bits however it is cut)."""
    if parallel is None or rows < 2:
        body(0, rows)
    else:
        parallel(body, rows)


def _check_shape(name: str, a: Any, expected: tuple[int, ...]) -> None:
    if tuple(a.shape) != expected:
        raise ValueError(f"{name} has shape {tuple(a.shape)}, this kernel was built for {expected}")


def _to_nhwc(a: Any, fmt: str) -> Any:
    """NHWC view of a 4-d activation (no copy)."""
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def _to_nchw(a: Any, fmt: str) -> Any:
    """NCHW view of a 4-d activation (no copy)."""
    return a if fmt == "NCHW" else a.transpose(0, 3, 1, 2)


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
        _check_shape("conv2d input", x, g.x_shape)
        if self._layout == "NHWC":
            src = _to_nhwc(x, g.data_format)
        else:
            src = _to_nchw(x, g.data_format)
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

        _by_rows(fill, g.N, self._parallel)
        return self.mat


class _WeightMatrix:
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
        _check_shape("conv2d weight", w, g.w_shape)
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
        _check_shape("conv2d weight", w, g.w_shape)
        if self.order == g.data_format:
            if w.flags.c_contiguous:
                return w.reshape(g.F, g.Kg)
            self._buf[...] = w
        elif self.order == "NHWC":  # w is (F, Cg, kh, kw)
            self._buf[...] = w.transpose(0, 2, 3, 1)
        else:  # w is (F, kh, kw, Cg)
            self._buf[...] = w.transpose(0, 3, 1, 2)
        return self._buf.reshape(g.F, g.Kg)


class _DyMatrix:
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
        _check_shape("conv2d output gradient dy", dy, g.y_shape)
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
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        dtype: Any,
        strides: Any = 1,
        pads: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        data_format: str = "NCHW",
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
        self.geom = g = ConvGeometry.create(x_shape, w_shape, strides, pads, dilation, groups, data_format)
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
            _check_shape("conv2d output buffer", out, self.out_shape)
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
            self._w = _WeightMatrix(xp, g, dtype, "NHWC", scratch=scratch)
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
            self._w = _WeightMatrix(xp, g, dtype, "NCHW", bias_column=self._bias_in_gemm, scratch=scratch)
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
                self._out = _to_nchw(gemm.reshape(g.N, oh, ow, g.F), "NHWC")
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
                _by_rows(lambda lo, hi: xp.maximum(src[lo:hi], 0, out=dst[lo:hi]), len(dst), self._parallel)
            else:
                _by_rows(lambda lo, hi: xp.copyto(dst[lo:hi], src[lo:hi]), len(dst), self._parallel)
        elif self.relu:
            target = self._relu_target
            _by_rows(lambda lo, hi: xp.maximum(target[lo:hi], 0, out=target[lo:hi]), len(target), self._parallel)
        return self._out


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
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        dtype: Any,
        strides: Any = 1,
        pads: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        data_format: str = "NCHW",
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
        self.geom = g = ConvGeometry.create(x_shape, w_shape, strides, pads, dilation, groups, data_format)
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
            _check_shape("conv2d filter gradient buffer", out, self.out_shape)
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
        self._dy = _DyMatrix(xp, g, dt, "fm", scratch=scratch)
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
            _check_shape("conv2d output gradient dy", dy, g.y_shape)
            fnp = dy.reshape(g.N, g.F, -1).transpose(1, 0, 2)
            if fnp.flags.c_contiguous:  # dy laid out (F, N, P) in memory: it is the (F, M) operand
                dyt = fnp.reshape(g.F, g.M)
            else:
                partial, cols, dw = self._per_image
                dy3 = dy.reshape(g.N, g.F, -1)
                # one GEMM per image, the images in parts over the host threads (each image's product is
                # the same however the batch is cut)
                _by_rows(lambda lo, hi: xp.matmul(dy3[lo:hi], cols[lo:hi], out=partial[lo:hi]), g.N,
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
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        dtype: Any,
        strides: Any = 1,
        pads: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        data_format: str = "NCHW",
        *,
        strategy: str | None = None,
        out: Any = None,
        scratch: Optional[Alloc] = None,
    ):
        self.xp = xp
        self.geom = g = ConvGeometry.create(x_shape, w_shape, strides, pads, dilation, groups, data_format)
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
            _check_shape("conv2d data gradient buffer", out, self.out_shape)
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
            dst = _to_nhwc(self._dx, g.data_format) if layout == "NHWC" else _to_nchw(self._dx, g.data_format)
            self._fix = (dst, interior)
        self._dy = _DyMatrix(xp, g, dt, "mf" if strategy == ROWS else "fm", scratch=scratch)
        if strategy == ROWS:
            # Taps' weights packed as (kh, kw, G, Fg, Cg): each GEMM operand is contiguous.
            self._wt = alloc((kh, kw, G, Fg, Cg), dt)
            self._tmp = alloc((g.M, g.C), dt)
            self._tmp4 = self._tmp.reshape(g.N, oh, ow, g.C)
            self._tmp_outs = [self._tmp[:, k * Cg:(k + 1) * Cg] for k in range(G)]
            self._taps = [self._dxpad[:, a, b, :] for i, j in win.taps() for a, b in [win.tap(i, j)]]
        else:
            self._w = _WeightMatrix(xp, g, dt, "NCHW", scratch=scratch)  # (F, Kg), K ordered (Cg, kh, kw)
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
        _check_shape("conv2d weight", w, g.w_shape)
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

    def __init__(self, xp: Any, x_shape: Sequence[int], w_shape: Sequence[int], dtype: Any,
                 strides: Any = 1, pads: Any = 0, dilation: Any = 1, groups: int = 1,
                 data_format: str = "NCHW", *, pool: tuple[Any, Any, Any], relu: bool = False,
                 strategy: str | None = None, algorithm: str = "im2col", max_pool: type | None = None,
                 parallel: Optional[Parallel] = None, products: Optional[Parallel] = None):
        """``parallel``: the convolution's copies (Winograd's chunks) and the pooling's blocks over the host
        threads (then ``max_pool`` must take ``parallel=``); ``products``: its GEMMs cut over them."""
        self.xp = xp
        g = self.geom = ConvGeometry.create(x_shape, w_shape, strides, pads, dilation, groups, data_format)
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
            self.conv = Conv2dForward(xp, x_shape, w_shape, dtype, strides, pads, dilation, groups, data_format,
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
            self.conv = Conv2dForward(xp, x_shape, w_shape, dtype, strides, pads, dilation, groups, data_format,
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
                geom = PoolGeometry(raw_shape, window.ksize, window.strides, window.pads, raw_fmt)
                self.pool = MaxPool(xp, geom, dtype, xp.empty(geom.y_shape, dtype=np.dtype(dtype)))
                pooled = geom.y_shape
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
