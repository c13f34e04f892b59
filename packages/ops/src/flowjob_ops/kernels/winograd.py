"""Winograd convolution on 8 x 8 tiles: forward, data gradient and filter gradient.

For a stride-1, undilated, ungrouped convolution with a square r x r kernel (3 <= r <= 5),
``F(m x m, r x r)`` with m = 9 - r computes each m x m output tile from an 8 x 8 input tile
with 64 products per (input channel, output channel) pair instead of m*m*r*r: 6.25x fewer
multiplications for LeNet's 5 x 5 kernels (F(4x4, 5x5)), 5.1x for 3 x 3 (F(6x6, 3x3)).
With the interpolation points 0, +-1, +-2, +-1/2 and infinity the float32 error stays at the
level of im2col + GEMM (about 4e-6 relative on LeNet's conv2; tested).

    y = A^T [ (G w G^T) . (B^T d B) ] A        per tile d, summed over input channels

The sum over input channels at each of the 64 tile points is a GEMM, (tiles x C) @ (C x F):
64 GEMMs replace one im2col GEMM 6x as large, and the 63 MB im2col matrix of LeNet's conv2
is never built (the transformed input is 13 MB).

Layout. Inside the kernels activations are "HWNC": (H, W, N, channels). Then every transform
is a GEMM over contiguous memory: the transform along H is one GEMM against a banded matrix
(tile rows x padded height) applied to the buffer seen as (H, W*N*C); along W it is a batch of
GEMMs against the same kind of matrix, written straight into the tile-point-major layout
(8, 8, tiles_h, tiles_w, N, C) the channel GEMMs read. The result leaves as a strided view of
the (H, W, N, F) output buffer in the graph's data_format (no copy; consumers read strided
arrays as they are).

The three kernels of one convolution:

* forward: transform x's tiles (B), the filter (G), 64 GEMMs, transform back (A);
* data gradient: the forward algorithm on dy padded by r - 1 - pad, with the filter rotated
  by 180 degrees and its two channel axes swapped;
* filter gradient: F(r x r, m x m) -- dw is the correlation of x with dy, so dy's m x m tiles
  play the kernel (G') and x's 8 x 8 tiles the data. B is the same matrix for both
  algorithms (it depends only on the points), so the filter gradient reuses the forward
  kernel's transformed input when it was made from the same array (as the im2col kernels
  share their column matrix); the sum over tiles and images is one GEMM per tile point,
  (F x tiles) @ (tiles x C).
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from flowjob_core.backends.host_blocks import PerThread, each_item
from .window2d import as_strided, check_data_format

ALPHA = 8  # tile size: m + r - 1
WINOGRAD_MAX_CHANNELS = 64  # see worthwhile()
CHUNK_BYTES = 2 << 20  # the images of one chunk keep their transforms in the last-level cache
MIN_CHUNKS = 4  # chunks of a batch at least (where it has the images): work for the host threads
Parallel = Callable[[Callable[[int, int], None], int], None]
KERNEL_SIZES = (3, 4, 5)

# Interpolation points (infinity is the last row/column of each matrix).
_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2))
# The data transform B^T for these points; it does not depend on m and r (only on the points),
# which is what lets the filter gradient reuse the forward's transformed input. Verified
# exactly by the tests for every supported (m, r).
_F = Fraction
_BT = (
    (-1, 0, _F(21, 4), 0, _F(-21, 4), 0, 1, 0),
    (0, 1, 1, _F(-17, 4), _F(-17, 4), 1, 1, 0),
    (0, -1, 1, _F(17, 4), _F(-17, 4), -1, 1, 0),
    (0, _F(1, 2), _F(1, 4), _F(-5, 2), _F(-5, 4), 2, 1, 0),
    (0, _F(-1, 2), _F(1, 4), _F(5, 2), _F(-5, 4), -2, 1, 0),
    (0, 2, 4, _F(-5, 2), -5, _F(1, 2), 1, 0),
    (0, -2, 4, _F(5, 2), -5, _F(-1, 2), 1, 0),
    (0, -1, 0, _F(21, 4), 0, _F(-21, 4), 0, 1),
)


@lru_cache(maxsize=None)
def exact_matrices(m: int, r: int) -> tuple[tuple, tuple, tuple]:
    """(A^T (m x 8), G (8 x r), B^T (8 x 8)) of F(m, r) as Fractions; m + r - 1 must be 8."""
    if m + r - 1 != ALPHA:
        raise ValueError(f"F({m}, {r}) does not use {ALPHA}-point tiles")
    scale = []
    for i, p in enumerate(_POINTS):
        f = Fraction(1)
        for j, q in enumerate(_POINTS):
            if j != i:
                f *= p - q
        scale.append(f)
    at = tuple(tuple(p ** k for p in _POINTS) + (Fraction(int(k == m - 1)),) for k in range(m))
    g = tuple(tuple(p ** j / scale[i] for j in range(r)) for i, p in enumerate(_POINTS))
    g += (tuple(Fraction(int(j == r - 1)) for j in range(r)),)
    bt = tuple(tuple(Fraction(v) for v in row) for row in _BT)
    return at, g, bt


def matrices(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A^T, G, B^T of F(m, r) as float64 arrays."""
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in exact_matrices(m, r))  # type: ignore[return-value]


def applicable(geom: Any) -> bool:
    """Whether these kernels can compute the convolution ``geom`` (a ConvGeometry)."""
    win = geom.window
    r = win.ksize[0]
    return (geom.groups == 1 and win.strides == (1, 1) and win.dilation == (1, 1) and win.ksize == (r, r)
            and r in KERNEL_SIZES and all(0 <= p <= r - 1 for pair in win.pads for p in pair))


def worthwhile(geom: Any) -> bool:
    """Whether Winograd beats im2col + GEMM here: enough channels for the 64 channel GEMMs.

    Measured on LeNet's conv2 (C=32, F=64, 14 x 14, batch 100): forward 2x, data gradient
    2.5x faster. With few input channels (LeNet's conv1 has C=1) the channel GEMMs degenerate
    and the transforms dominate, so im2col stays. From 64 input channels on, im2col's one GEMM
    (K = 9 C deep) runs near the BLAS peak and wins: ResNet-50's 3x3 convolutions at batch 16
    (C = F = 64 at 56 x 56 up to 512 at 7 x 7) took 1.0-10x longer with Winograd (forward 393 ms
    against 38 ms at 512 channels), and far more inside a whole training step.
    """
    return applicable(geom) and min(geom.C, geom.F) >= 16 and geom.C < WINOGRAD_MAX_CHANNELS


def _banded(xp: Any, dtype: Any, matrix: np.ndarray, tiles: int, stride: int, offset: int, length: int) -> Any:
    """(rows, tiles, length): row (a, t) holds matrix[a] from column offset + stride*t on.

    Columns past ``length`` are dropped: the data there is zero padding by construction.
    """
    rows, width = matrix.shape
    out = np.zeros((rows, tiles, length))
    for t in range(tiles):
        lo = offset + stride * t
        hi = min(lo + width, length)
        if hi > lo:
            out[:, t, lo:hi] = matrix[:, : hi - lo]
    return xp.asarray(out.astype(dtype))


def _chunks(n: int, per_image: int) -> list[tuple[int, int]]:
    """Near-equal runs of images whose working set is about CHUNK_BYTES, and at least MIN_CHUNKS of them
    (at most two run sizes). The count depends on the shapes alone, never on the threads that run them."""
    count = max(1, min(n, max(MIN_CHUNKS, -(-n * per_image // CHUNK_BYTES))))
    size = -(-n // count)
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


class _TileTransform:
    """P^T d P for every tile d of an (Lh, Lw, n, K) buffer, into an (a, a, th, tw, n*K) array.

    ``matrix`` is P^T (a x width); tile (ty, tx) covers rows offset + stride*ty ... and
    columns likewise.
    """

    def __init__(self, xp: Any, dtype: Any, matrix: np.ndarray, tiles: tuple[int, int], stride: int,
                 offset: tuple[int, int], src_hw: tuple[int, int], nk: int) -> None:
        self.xp = xp
        a = self._a = matrix.shape[0]
        th, tw = self._tiles = tiles
        self._nk, self._dtype = nk, dtype
        self._lh = src_hw[0]
        self._rows = _banded(xp, dtype, matrix, th, stride, offset[0], src_hw[0]).reshape(a * th, src_hw[0])
        self._cols = _banded(xp, dtype, matrix, tw, stride, offset[1], src_hw[1])[None, None]  # (1, 1, b, tw, Lw)
        self._r = xp.empty((a, th, src_hw[1], nk), dtype=dtype)
        self._r_view = self._r.reshape(a * th, -1)
        self._r_cols = self._r[:, :, None]  # (a, th, 1, Lw, nk)

    def new_output(self) -> Any:
        a, (th, tw) = self._a, self._tiles
        return self.xp.empty((a, a, th, tw, self._nk), dtype=self._dtype)

    def __call__(self, src: Any, out: Any) -> Any:
        xp = self.xp
        xp.matmul(self._rows, src.reshape(self._lh, -1), out=self._r_view)  # along H
        # along W, per (a, ty, b): each (tw, nk) block of out is contiguous
        xp.matmul(self._cols, self._r_cols, out=out.transpose(0, 2, 1, 3, 4))
        return out


class _OutputTransform:
    """A^T M A for every tile: (8, 8, th, tw, n*K) -> an (th*m, tw*m, n, K) array (a view may do)."""

    def __init__(self, xp: Any, dtype: Any, at: np.ndarray, tiles: tuple[int, int], nk: int) -> None:
        self.xp = xp
        m, a = at.shape
        th, tw = self._tiles = tiles
        self._m = m
        self._at = xp.asarray(at.astype(dtype))
        self._z = xp.empty((m, a, th, tw, nk), dtype=dtype)
        # contract a as a batch of (m x 8) @ (8 x n*K) GEMMs: one GEMM of 8 x (everything) is
        # bandwidth-starved in OpenBLAS (measured 1.7x slower)
        self._z_batches = self._z.reshape(m, a * th * tw, nk).transpose(1, 0, 2)
        self._a, self._batches = a, a * th * tw
        self._z_view = self._z.transpose(0, 2, 3, 1, 4)  # (k, ty, tx, b, nk)

    def __call__(self, products: Any, target: Any) -> None:
        xp = self.xp
        src = products.reshape(self._a, self._batches, -1).transpose(1, 0, 2)
        xp.matmul(self._at, src, out=self._z_batches)  # contract a
        xp.matmul(self._at, self._z_view, out=target)  # contract b, into the output tiles


def _output_target(xp: Any, out: Any, tiles: tuple[int, int], m: int) -> Any:
    """out (th*m, tw*m, n, K), n's stride K times K's: the (k, ty, tx, l, n*K) view an ``_OutputTransform``
    writes."""
    th, tw = tiles
    s_h, s_w, s_n, s_k = out.strides
    n, k = out.shape[2:]
    if s_n != k * s_k and n > 1:
        raise ValueError("Winograd output slices must keep each image's channels contiguous")
    return as_strided(xp, out, (m, th, tw, m, n * k), (s_h, m * s_h, m * s_w, s_w, s_k))


def _hwnc(a: Any, data_format: str) -> Any:
    """(H, W, N, C) view of a 4-d activation."""
    return a.transpose(2, 3, 0, 1) if data_format == "NCHW" else a.transpose(1, 2, 0, 3)


def _from_hwnc(a: Any, data_format: str) -> Any:
    """A data_format view of an (H, W, N, C) array."""
    return a.transpose(2, 3, 0, 1) if data_format == "NCHW" else a.transpose(2, 0, 1, 3)


def _fcrr(w: Any, data_format: str) -> Any:
    """(F, C, r, r) view of a weight in data_format."""
    return w if data_format == "NCHW" else w.transpose(0, 3, 1, 2)


class _FilterTransform:
    """U = G w G^T for every (F, C) pair, as 64 GEMM operands (a*8 + b, rows, cols).

    ``rotate=False`` gives (64, C, F) (forward); ``True`` gives (64, F, C) of the kernel rotated
    by 180 degrees (data gradient).
    """

    def __init__(self, xp: Any, dtype: Any, g: np.ndarray, f: int, c: int, r: int, rotate: bool) -> None:
        self.xp, self.rotate = xp, rotate
        self._g = xp.asarray(g.astype(dtype))
        self._gt = xp.asarray(np.ascontiguousarray(g.T).astype(dtype))
        self._gw = xp.empty((f, c, ALPHA, r), dtype=dtype)
        self._gwg = xp.empty((f, c, ALPHA, ALPHA), dtype=dtype)
        self.out = xp.empty((ALPHA, ALPHA, c, f) if not rotate else (ALPHA, ALPHA, f, c), dtype=dtype)
        perm = (2, 3, 1, 0) if not rotate else (2, 3, 0, 1)
        self._src = self._gwg.transpose(perm)
        self._shape = (ALPHA * ALPHA,) + self.out.shape[2:]

    def __call__(self, w_fcrr: Any) -> Any:
        xp = self.xp
        if self.rotate:
            w_fcrr = w_fcrr[:, :, ::-1, ::-1]
        xp.matmul(self._g, w_fcrr, out=self._gw)
        xp.matmul(self._gw, self._gt, out=self._gwg)
        self.out[...] = self._src
        return self.out.reshape(self._shape)


class _Geometry:
    """Tile counts, paddings, buffer sizes and image chunks of one Winograd convolution."""

    def __init__(self, geom: Any, itemsize: int) -> None:
        if not applicable(geom):
            raise ValueError(f"Winograd kernels need a stride-1, undilated, ungrouped convolution with a square "
                             f"{'/'.join(map(str, KERNEL_SIZES))} kernel and pads below it, got {geom}")
        self.geom = geom
        self.fmt = check_data_format(geom.data_format)
        self.r = r = geom.window.ksize[0]
        self.m = m = ALPHA + 1 - r
        self.pads = geom.window.pads  # ((top, bottom), (left, right))
        oh, ow = geom.window.out_hw
        self.out_hw = (oh, ow)
        self.tiles = (-(-oh // m), -(-ow // m))  # output tiles (forward, filter gradient)
        self.in_tiles = (-(-geom.H // m), -(-geom.W // m))  # input tiles (data gradient)
        # per image: transformed input and output-side products of one direction (the larger)
        th, tw = max(self.tiles, self.in_tiles)
        per_image = ALPHA * ALPHA * th * tw * (geom.C + 2 * geom.F) * itemsize
        self.chunks = _chunks(geom.N, per_image)

    def padded(self, tiles: tuple[int, int]) -> tuple[int, int]:
        return (tiles[0] * self.m + self.r - 1, tiles[1] * self.m + self.r - 1)


class _Stage:
    """The scratch of one chunk size: a zero-bordered HWNC input buffer, its tile transform and
    the channel-GEMM products (shared by every chunk of that size)."""

    def __init__(self, xp: Any, dtype: Any, bt: np.ndarray, tiles: tuple[int, int], m: int,
                 padded: tuple[int, int], offset: tuple[int, int], interior_hw: tuple[int, int], n: int,
                 c_in: int, c_out: int) -> None:
        self.pad = xp.zeros(padded + (n, c_in), dtype=dtype)
        (t, l), (h, w) = offset, interior_hw
        self.interior = self.pad[t:t + h, l:l + w]
        self.transform = _TileTransform(xp, dtype, bt, tiles, m, (0, 0), padded, n * c_in)
        self.tile_count = tiles[0] * tiles[1] * n
        self.products = xp.empty((ALPHA * ALPHA, self.tile_count, c_out), dtype=dtype)


class _Scratch:
    """The scratch of each chunk size, made on first use by each thread that runs chunks of that size: the
    chunks of a batch run side by side over the host threads (``parallel``), or in order without it."""

    def __init__(self, make: Callable[[int], Any], parallel: Parallel | None, chunks: int) -> None:
        self._make = make
        self._local = PerThread()
        self.parallel = parallel if chunks > 1 else None

    def __call__(self, size: int) -> Any:
        return self._local.get(size, lambda: self._make(size))


class WinogradForward:
    """y = conv2d(x, w) (+ b, relu) by F(m x m, r x r); y is a strided view of the kernel's buffer.

    The batch runs in chunks of images sized for the last-level cache (each transform is a pass
    over memory). ``transformed`` / ``source``: the last call's transformed input (one array per
    chunk) and the array it came from, for the filter-gradient kernel to reuse.
    """

    def __init__(self, xp: Any, geom: Any, dtype: Any, *, bias: bool = False, relu: bool = False,
                 parallel: Parallel | None = None) -> None:
        self.xp, self.geom = xp, geom
        self.bias, self.relu = bool(bias), bool(relu)
        dt = self.dtype = np.dtype(dtype)
        self.shape = shape = _Geometry(geom, dt.itemsize)
        at, g, bt = matrices(shape.m, shape.r)
        (pt, _), (pl, _) = shape.pads
        th, tw = shape.tiles
        padded = shape.padded(shape.tiles)
        self._scratch = _Scratch(lambda n: (
            _Stage(xp, dt, bt, shape.tiles, shape.m, padded, (pt, pl), (geom.H, geom.W), n, geom.C, geom.F),
            _OutputTransform(xp, dt, at, shape.tiles, n * geom.F)), parallel, len(shape.chunks))
        self._filter = _FilterTransform(xp, dt, g, geom.F, geom.C, shape.r, rotate=False)
        out4 = xp.empty((th * shape.m, tw * shape.m, geom.N, geom.F), dtype=dt)
        self._runs = []
        self.transformed: list[Any] = []
        for lo, hi in shape.chunks:
            self.transformed.append(xp.empty((ALPHA, ALPHA, th, tw, (hi - lo) * geom.C), dtype=dt))
            self._runs.append((lo, hi, _output_target(xp, out4[:, :, lo:hi], shape.tiles, shape.m)))
        self._out4 = out4
        oh, ow = shape.out_hw
        self._valid = out4[:oh, :ow]
        self._y = _from_hwnc(self._valid, shape.fmt)
        self.source: Any = None

    def transform_input(self, x: Any) -> list[Any]:
        """Only the input transform (for a filter gradient that cannot reuse a forward's)."""
        def chunk(k: int) -> None:
            lo, hi, _ = self._runs[k]
            stage, _ = self._scratch(hi - lo)
            stage.interior[...] = _hwnc(x[lo:hi], self.shape.fmt)
            stage.transform(stage.pad, self.transformed[k])

        each_item(range(len(self._runs)), chunk, self._scratch.parallel)
        return self.transformed

    def raw(self, x: Any, w: Any) -> Any:
        """conv(x, w) without bias, as the (H', W', N, F) output buffer (H' >= OH, W' >= OW)."""
        xp, geom, fmt = self.xp, self.geom, self.shape.fmt
        if tuple(x.shape) != geom.x_shape:
            raise ValueError(f"conv2d input has shape {tuple(x.shape)}, this kernel was built for {geom.x_shape}")
        if tuple(w.shape) != geom.w_shape:
            raise ValueError(f"conv2d weight has shape {tuple(w.shape)}, this kernel was built for {geom.w_shape}")
        self.source = None
        u = self._filter(_fcrr(w, fmt))

        def chunk(k: int) -> None:
            lo, hi, target = self._runs[k]
            stage, output = self._scratch(hi - lo)
            v = self.transformed[k]
            stage.interior[...] = _hwnc(x[lo:hi], fmt)
            stage.transform(stage.pad, v)
            xp.matmul(v.reshape(ALPHA * ALPHA, stage.tile_count, geom.C), u, out=stage.products)
            output(stage.products, target)

        each_item(range(len(self._runs)), chunk, self._scratch.parallel)
        self.source = x
        return self._out4

    def __call__(self, x: Any, w: Any, b: Any = None) -> Any:
        xp = self.xp
        if self.bias:
            if b is None or tuple(b.shape) != (self.geom.F,):
                raise ValueError(f"conv2d bias must have shape ({self.geom.F},), got "
                                 f"{None if b is None else tuple(b.shape)}")
        elif b is not None:
            raise ValueError("this conv2d kernel was built without a bias")
        self.raw(x, w)
        valid = self._valid  # the epilogue skips the padding tiles' rows and columns
        if self.bias:
            xp.add(valid, b, out=valid)
        if self.relu:
            xp.maximum(valid, 0, out=valid)
        return self._y


class WinogradBackwardData:
    """dx = d(loss)/dx: the forward algorithm on dy padded by r - 1 - pad, with the kernel rotated."""

    def __init__(self, xp: Any, geom: Any, dtype: Any, parallel: Parallel | None = None) -> None:
        self.xp, self.geom = xp, geom
        dt = np.dtype(dtype)
        self.shape = shape = _Geometry(geom, dt.itemsize)
        at, g, bt = matrices(shape.m, shape.r)
        r = shape.r
        (pt, _), (pl, _) = shape.pads
        th, tw = shape.in_tiles
        padded = shape.padded(shape.in_tiles)

        def scratch(n: int) -> tuple[_Stage, Any, _OutputTransform]:
            stage = _Stage(xp, dt, bt, shape.in_tiles, shape.m, padded, (r - 1 - pt, r - 1 - pl), shape.out_hw, n,
                           geom.F, geom.C)
            return stage, stage.transform.new_output(), _OutputTransform(xp, dt, at, shape.in_tiles, n * geom.C)

        self._scratch = _Scratch(scratch, parallel, len(shape.chunks))
        self._filter = _FilterTransform(xp, dt, g, geom.F, geom.C, r, rotate=True)
        out4 = xp.empty((th * shape.m, tw * shape.m, geom.N, geom.C), dtype=dt)
        self._runs = [(lo, hi, _output_target(xp, out4[:, :, lo:hi], shape.in_tiles, shape.m))
                      for lo, hi in shape.chunks]
        self._dx = _from_hwnc(out4[:geom.H, :geom.W], shape.fmt)

    def __call__(self, dy: Any, w: Any) -> Any:
        xp, geom, fmt = self.xp, self.geom, self.shape.fmt
        if tuple(dy.shape) != geom.y_shape:
            raise ValueError(f"conv2d output gradient dy has shape {tuple(dy.shape)}, this kernel was built for "
                             f"{geom.y_shape}")
        if tuple(w.shape) != geom.w_shape:
            raise ValueError(f"conv2d weight has shape {tuple(w.shape)}, this kernel was built for {geom.w_shape}")
        u = self._filter(_fcrr(w, fmt))

        def chunk(k: int) -> None:
            lo, hi, target = self._runs[k]
            stage, v, output = self._scratch(hi - lo)
            stage.interior[...] = _hwnc(dy[lo:hi], fmt)
            stage.transform(stage.pad, v)
            xp.matmul(v.reshape(ALPHA * ALPHA, stage.tile_count, geom.F), u, out=stage.products)
            output(stage.products, target)

        each_item(range(len(self._runs)), chunk, self._scratch.parallel)
        return self._dx


class WinogradBackwardFilter:
    """dw = d(loss)/dw by F(r x r, m x m): dy's m x m tiles against x's 8 x 8 tiles.

    ``forward``: a WinogradForward of the same convolution whose transformed input may be
    reused; ``__call__(x, dy, reuse=True)`` reuses it when it was made from this very ``x``.
    """

    def __init__(self, xp: Any, geom: Any, dtype: Any, forward: WinogradForward | None = None,
                 parallel: Parallel | None = None) -> None:
        self.xp, self.geom = xp, geom
        self._parallel = parallel
        dt = np.dtype(dtype)
        self.shape = shape = _Geometry(geom, dt.itemsize)
        if forward is not None and (forward.geom != geom or forward.dtype != dt):
            raise ValueError("the shared Winograd forward kernel was built for another convolution or dtype")
        self._forward = forward
        self._own_forward: WinogradForward | None = None
        r, m = shape.r, shape.m
        at_dw, g_dw, _ = matrices(r, m)  # F(r, m): the output is the r x r kernel
        th, tw = shape.tiles
        oh, ow = shape.out_hw

        def stage(n: int) -> tuple[Any, Any, Any, Any]:
            dy_buf = xp.zeros((th * m, tw * m, n, geom.F), dtype=dt)
            transform = _TileTransform(xp, dt, g_dw, shape.tiles, m, (0, 0), (th * m, tw * m), n * geom.F)
            return dy_buf, dy_buf[:oh, :ow], transform, transform.new_output()

        self._scratch = _Scratch(stage, parallel, len(shape.chunks))
        # one sum per chunk, added in chunk order afterwards: the same bits however many threads ran them
        self._sums = [xp.empty((ALPHA * ALPHA, geom.F, geom.C), dtype=dt) for _ in shape.chunks]
        self._at = xp.asarray(at_dw.astype(dt))
        self._half = xp.empty((r, ALPHA, geom.F * geom.C), dtype=dt)
        self._rr = xp.empty((r, r, geom.F * geom.C), dtype=dt)
        self._dw = xp.empty(geom.w_shape, dtype=dt)
        rr4 = self._rr.reshape(r, r, geom.F, geom.C)
        self._dw_src = rr4.transpose(2, 3, 0, 1) if shape.fmt == "NCHW" else rr4.transpose(2, 0, 1, 3)

    def _transformed_input(self, x: Any, reuse: bool) -> list[Any]:
        if reuse and self._forward is not None and self._forward.source is x:
            return self._forward.transformed
        if self._own_forward is None:  # only when the forward's transform cannot be reused
            self._own_forward = WinogradForward(self.xp, self.geom, self._dw.dtype, parallel=self._parallel)
        return self._own_forward.transform_input(x)

    def __call__(self, x: Any, dy: Any, *, reuse: bool = False) -> Any:
        xp, geom = self.xp, self.geom
        if tuple(x.shape) != geom.x_shape:
            raise ValueError(f"conv2d input has shape {tuple(x.shape)}, this kernel was built for {geom.x_shape}")
        if tuple(dy.shape) != geom.y_shape:
            raise ValueError(f"conv2d output gradient dy has shape {tuple(dy.shape)}, this kernel was built for "
                             f"{geom.y_shape}")
        count = ALPHA * ALPHA
        transformed = self._transformed_input(x, reuse)

        def chunk(k: int) -> None:
            lo, hi = self.shape.chunks[k]
            dy_buf, interior, transform, d = self._scratch(hi - lo)
            interior[...] = _hwnc(dy[lo:hi], self.shape.fmt)
            transform(dy_buf, d)
            tiles = d.size // (count * geom.F)
            # per tile point: (F x tiles) @ (tiles x C), summed over every tile of the chunk's images
            xp.matmul(d.reshape(count, tiles, geom.F).transpose(0, 2, 1), transformed[k].reshape(count, tiles, geom.C),
                      out=self._sums[k])

        each_item(range(len(self.shape.chunks)), chunk, self._scratch.parallel)
        total = self._sums[0]
        for partial in self._sums[1:]:
            xp.add(total, partial, out=total)
        xp.matmul(self._at, total.reshape(ALPHA, -1), out=self._half.reshape(self.shape.r, -1))  # contract a
        xp.matmul(self._at, self._half, out=self._rr)  # contract b, per kernel row
        self._dw[...] = self._dw_src
        return self._dw
