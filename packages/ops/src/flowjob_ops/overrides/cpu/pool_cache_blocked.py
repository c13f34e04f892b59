"""Cache-blocked, tiled 2-D pooling: the cpu backend's overrides of ``max_pool2d``, ``max_pool2d_grad``,
``max_pool2d_relu_grad``, ``avg_pool2d`` and ``avg_pool2d_grad`` (registered by
``flowjob_ops.overrides.cpu``); the conformance suite checks them against the ops' rank-generic
reference kernels (``flowjob_ops.kernels.pool``).

Average pooling runs the plane-layout kernels of ``overrides.cpu.pool_plane_layout`` (a global pooling as one
reduction). The plane-layout max kernels take kh*kw passes over the output, each an inner loop of only ow
strided elements, and the backward several passes over full-size arrays. These subclasses replace that,
with the same results bit for bit, where it pays:

Tiled path (``_Tiling``): when the windows tile the padded plane
(ksize == strides with nothing left over, e.g. LeNet's 2x2 / stride 2 pooling).  The arrays are
taken in one memory order (the output's, or x's own when x's rows do not run
along the output's innermost axis; ``memory_order`` also finds the (C, N, H, W)
and (H, W, N, C) orders of the conv kernels' strided outputs) and x is split
into the axes (outer..., oh, kh, ow, kw, inner...); numpy works through blocks
of the outermost axis whose temporaries stay in the core's cache
(``block_bytes``, ``BLOCK_BYTES`` by default), so x is read and the output written
once, along memory:

* forward: the kw taps of every window row are combined first (for NCHW one
  long 1-d strided loop), then the kh rows.  ``maximum`` returns its first NaN
  operand and, of equal values (+0 / -0), its second, so this grouping of the
  taps gives bit for bit the result of the tap-by-tap chain.  y keeps its
  layout (contiguous in ``data_format``);
* backward: y and dy are brought into that order (one cache-friendly
  transposing copy when they arrive in another layout) and repeated kw times
  along the width (one uint64 multiply for 32-bit 2x2); then ``hit = x == y``
  and ``dx = dy * hit`` are one broadcast ufunc each per block.  Windows with
  two or more hits (ties) need the first-maximum rule: a check over ``hit``
  (uint16 lanes for kw == 2) finds them, and only for such a block are later
  hits cleared tap by tap.  The products are the generic path's ``dy * 1`` /
  ``dy * 0``, so NaN, -0 and inf in dy give the same bits.  With
  ``relu=True``, windows with y <= 0 are compared against y / 0 (NaN, or -inf
  for y < 0), so they have no hits (barring -inf in x) and no ties: their
  gradient, dy * 0, is the same wherever it goes.  dx's layout: see
  ``TiledMaxPool2dBackward``.

Elsewhere (overlapping windows such as ResNet's 3x3 / stride 2, gaps) they run the reference
algorithm tap by tap, but block by block of whole planes (``_Planes``: ranges of N and C for NCHW,
of N for NHWC), so that a block's padded input, temporaries and gradient stay in cache through all
kh*kw taps, and the blocks are shared out over the backend's host threads (``Backend.parallel``;
blocks never share an element). Same operations per element in the same order: bit for bit the
reference. Global pooling keeps the reference's one reduction.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core import KernelContext

from flowjob_ops.records import pool as pool_records
from flowjob_core.backends.host_blocks import PerThread, copy_along_memory, each_item, host_parallel
from flowjob_ops.kernels.window2d import as_strided
from flowjob_ops.overrides.cpu.pool_plane_layout import (AvgPool2d, AvgPool2dBackward, MaxPool2d, MaxPool2dBackward,
                                                        PaddedGrad)

# numpy runs the tiled path in blocks whose input slice has about this many bytes, so that the
# temporaries stay in the core's cache (2 MiB L2 here) and only x, y, dy and dx travel to memory;
# every block costs ~10-15 ufunc calls of Python overhead.
BLOCK_BYTES = 1 << 19
# the tap-by-tap path's blocks of whole planes: its per-block cost is some 5 ufunc calls per tap
PLANE_BLOCK_BYTES = 1 << 20
Parallel = Callable[[Callable[[int, int], None], int], None]


class _Planes:
    """Index tuples of whole planes (axes N and C for NCHW, N for NHWC) whose padded input holds about
    ``block_bytes``; ``each(body)`` runs ``body(index)`` on every block, over ``parallel`` if given."""

    def __init__(self, pool: Any, block_bytes: int | None, parallel: Parallel | None):
        n, *rest = pool.padded_shape
        nchw = pool.data_format == "NCHW"
        c = rest[0] if nchw else 1
        plane = int(np.prod(pool.padded_shape[2:] if nchw else pool.padded_shape[1:])) * pool.dtype.itemsize
        per = max(1, (block_bytes or n * c * plane) // max(plane, 1))  # planes per block
        blocks: list[tuple[slice, ...]] = []
        if per >= c:  # whole images per block
            step = per // c
            blocks = [(slice(i, min(i + step, n)),) for i in range(0, n, step)]
        else:
            blocks = [(slice(i, i + 1), slice(j, min(j + per, c))) for i in range(n) for j in range(0, c, per)]
        self.blocks = blocks
        self._parallel = parallel if parallel is not None and len(blocks) > 1 else None
        self._local = PerThread()

    def each(self, body: Callable[[tuple[slice, ...]], None]) -> None:
        each_item(self.blocks, body, self._parallel)

    def scratch(self, xp: Any, name: str, shape: tuple[int, ...], dtype: Any) -> Any:
        """The calling thread's own buffer ``name`` of this shape (blocks run on several threads)."""
        return self._local.get((name, shape), lambda: xp.empty(shape, dtype=dtype))


def _c_contiguous(a: Any) -> bool:
    flags = getattr(a, "flags", None)
    return bool(getattr(flags, "c_contiguous", False))


def _tap(a: Any, axis: int, k: int) -> Any:
    """a[..., k, ...] with k indexing ``axis``."""
    return a[(slice(None),) * axis + (k,)]


def _gathered(xp: Any, a: Any, buf: Any) -> Any:
    """a itself when C-contiguous, else a copied into buf (of a's shape).

    The copy is given both arrays in a's memory order, which numpy then follows (the two
    operands' strides disagree): a strided block is read along its memory and scattered into
    the small buffer, which stays in cache.
    """
    if _c_contiguous(a):
        return a
    order = sorted(range(a.ndim), key=lambda k: -abs(a.strides[k]) if a.shape[k] > 1 else 1)
    xp.copyto(buf.transpose(order), a.transpose(order))
    return buf


def memory_order(a: Any, spatial: tuple[int, int]) -> tuple[int, ...]:
    """a's axes from outermost to innermost in memory (by stride), the spatial (h, w) kept together.

    E.g. (N, C, H, W) for NCHW, (N, H, W, C) for NHWC, and for the conv kernels' strided
    outputs (C, N, H, W) ("FNHW") or (H, W, N, C) ("HWNC").  The tiled path works in the
    output's own order when x's rows run along the output's innermost axis, else in this one;
    any order gives the same results.
    """
    h, w = spatial
    shape, strides = a.shape, a.strides

    def key(k: int) -> Any:
        axis = w if k == h else k
        return -1 if shape[axis] == 1 and k != h else abs(strides[axis])

    items = sorted((k for k in range(a.ndim) if k != w), key=lambda k: -key(k))  # stable: ties keep order
    order: list[int] = []
    for k in items:
        order += [h, w] if k == h else [k]
    return tuple(order)


class _Tiling:
    """Windows that tile the (padded) plane, and one memory order of the arrays.

    In that order the input is split into 6 axes (outer..., oh, kh, ow, kw, inner...): the
    window taps are axes ``KH`` and ``KW``; pooled arrays (y, dy) have (outer..., oh, ow,
    inner...).  ``blocks`` are index tuples for both: ranges of the outermost axis (so that the
    input's inner loops stay long), and when one index of it is too big, also ranges of the
    output rows (axis ``p``); one block when ``block_bytes`` is None.  A block's scratch shapes
    come from ``shape``.
    """

    def __init__(self, pool: Any, order: tuple[int, ...], block_bytes: int | None):
        win = pool.window
        self.kh, self.kw = kh, kw = win.ksize
        oh, ow = win.out_hw
        h = pool._sp[0]
        self.order = order
        p = order.index(h)  # order[p + 1] is w
        mem = [pool.padded_shape[k] for k in order]
        self.p, self.inner = p, int(np.prod(mem[p + 2:], dtype=np.int64))
        self.x6 = tuple(mem[:p] + [oh, kh, ow, kw] + mem[p + 2:])
        self.KH, self.KW = p + 1, p + 3
        # index tuples: tap i of the window rows / j of the columns, and a new length-1 kh axis
        self.row_tap = [(slice(None),) * self.KH + (i,) for i in range(kh)]
        self.col_tap = [(slice(None),) * self.KW + (j,) for j in range(kw)]
        self.new_kh = (slice(None),) * self.KH + (None,)
        size = self.x6[0]
        unit = int(np.prod(self.x6[1:], dtype=np.int64)) * pool.dtype.itemsize  # one index of axis 0
        step, rows = size, oh
        if block_bytes and unit:
            step = max(1, min(size, block_bytes // unit))
            if unit > block_bytes and p > 0:
                rows = max(1, min(oh, block_bytes // (unit // oh)))
        self.blocks = []
        for o in range(0, size, step):
            for a in range(0, oh if p > 0 else 1, rows):
                index = [slice(o, min(o + step, size))] + [slice(None)] * p
                if p > 0:
                    index[p] = slice(a, min(a + rows, oh))
                self.blocks.append(tuple(index))

    def block_shape(self, index: tuple[slice, ...]) -> tuple[int, ...]:
        """The 6-axis shape of a block."""
        dims = list(self.x6)
        for axis, sl in enumerate(index):
            start, stop, _ = sl.indices(dims[axis])
            dims[axis] = stop - start
        return tuple(dims)

    def shape(self, block: tuple[int, ...], *, without: int | None = None, pooled: bool = False) -> tuple[int, ...]:
        """A scratch shape for a block: without axis ``without``, or the pooled shape."""
        dims = list(block)
        if pooled:
            del dims[self.KW], dims[self.KH]
        elif without is not None:
            del dims[without]
        return tuple(dims)

    @staticmethod
    def applies(pool: Any) -> bool:
        """Whether the windows tile the plane (and are not a global pooling or a copy)."""
        win = pool.window
        return win.tiles and win.out_hw != (1, 1) and win.ksize != (1, 1)

    def split(self, xp: Any, a: Any) -> Any:
        """a (the padded input's shape) in memory order, split into the 6 axes (a view)."""
        p, kh, kw = self.p, self.kh, self.kw
        s = [a.strides[k] for k in self.order]
        strides = s[:p] + [kh * s[p], s[p], kw * s[p + 1], s[p + 1]] + s[p + 2:]
        return as_strided(xp, a, self.x6, strides)

    def pooled(self, a: Any) -> Any:
        """A pooled array (y, dy) in memory order."""
        return a.transpose(self.order)


class _GradBuffers:
    """The tiled backward's temporaries for one block shape."""

    def __init__(self, xp: Any, t: _Tiling, block: tuple[int, ...], dtype: np.dtype, relu: bool):
        pooled = t.shape(block, pooled=True)
        if relu:
            self.maskv = xp.empty(pooled, dtype=dtype)  # (y > 0) as 1 / 0
            self.masked = xp.empty(pooled, dtype=dtype)
            # y where y > 0, else y / 0 (NaN, or -inf): comparisons skip those windows, whose
            # gradient dy * 0 is the same wherever it goes (ints keep y: exact, just slower)
            self.pos = xp.empty(pooled, dtype=dtype) if dtype.kind == "f" else None
        self.y = xp.empty(pooled, dtype=dtype)  # y or dy blocks that are not contiguous, copied
        self.dy = xp.empty(pooled, dtype=dtype)
        self.yw = xp.empty(t.shape(block, without=t.KH), dtype=dtype)  # y repeated kw times
        self.dyw = xp.empty(t.shape(block, without=t.KH), dtype=dtype)
        self.yw_rows, self.dyw_rows = self.yw[t.new_kh], self.dyw[t.new_kh]  # broadcast over kh
        self.hits = xp.empty(block, dtype=bool)  # x == y, in the tiling's 6 axes
        self.lanes = t.kw == 2 and t.inner == 1
        if self.lanes:
            # the tie check on uint16 lanes: one lane holds the two taps of a window row
            n_lanes = int(np.prod(block, dtype=np.int64)) // 2
            ow = block[t.KW - 1]
            self.flag = xp.empty(n_lanes, dtype=bool)
            self.nonzero = xp.empty(n_lanes, dtype=bool)
            row = (np.arange(n_lanes) // ow) % t.kh  # window row of each lane
            # lanes k and k + d*ow are rows of one window
            self.same_window = [xp.asarray(row < t.kh - d) for d in range(1, t.kh)]
        else:
            self.rowcount = xp.empty(t.shape(block, without=t.KH), dtype=np.uint8)  # hits summed over rows
            self.count = xp.empty(pooled, dtype=np.uint8)
            self.tie = xp.empty(pooled, dtype=bool)
        self.free = xp.empty(pooled, dtype=bool)

class TiledMaxPool2d(MaxPool2d):
    """``MaxPool2d`` with the tiled, cache-blocked path where the windows tile the plane."""

    def _setup(self, *, block_bytes: int | None = BLOCK_BYTES, plane_block_bytes: int | None = PLANE_BLOCK_BYTES,
               parallel: Parallel | None = None) -> None:
        super()._setup()
        self.block_bytes = block_bytes
        self._tiled = not self._global and _Tiling.applies(self)
        self._layouts: dict[tuple[int, ...], _Tiling] = {}  # by the input's strides
        self._planes = _Planes(self, plane_block_bytes, parallel)
        self._parallel = parallel
        self._local = PerThread()  # the tiled blocks' scratch, per thread that runs blocks

    def __call__(self, x: Any) -> Any:
        """Return y (the kernel's own buffer, overwritten by the next call)."""
        if self._tiled:
            self._tiled_max(self._src(x))
            return self._y
        if self._global or len(self._tap_idx) == 1:
            return super().__call__(x)
        self._check("pooling input x", x, self.x_shape)
        self._planes.each(lambda index: self._max_block(x, index))
        return self._y

    def _max_block(self, x: Any, index: tuple[slice, ...]) -> None:
        """The reference's tap-by-tap maximum on one block of planes (padded first, while cached)."""
        xp, pad = self.xp, self._src
        if pad._buf is None:
            src = x[index]
        else:
            pad._inner[index] = x[index]
            src = pad._buf[index]
        y = self._y[index]
        taps = [src[idx] for idx in self._tap_idx]
        xp.maximum(taps[0], taps[1], out=y)
        for t in taps[2:]:
            xp.maximum(y, t, out=y)

    def _layout(self, src: Any) -> _Tiling:
        key = tuple(src.strides)
        if key not in self._layouts:
            order = memory_order(src, self._sp)
            if order[-1] == 3:  # x's rows run along y's innermost axis: work in y's order
                order = (0, 1, 2, 3)
            self._layouts[key] = _Tiling(self, order, self.block_bytes)
        return self._layouts[key]

    def _tiled_max(self, src: Any) -> None:
        """Windows that tile the plane: max over each window row's kw taps, then over the kh rows.

        Same result bit for bit as the tap-by-tap chain: ``maximum`` keeps its first NaN operand
        and, of equal values (+0 / -0), its second, so any grouping of the taps in window order
        picks the same element (the first NaN, else the last maximal one). The blocks (disjoint) run over
        the host threads, each thread with its own scratch.
        """
        xp = self.xp
        t = self._layout(src)
        kh, kw, KW = t.kh, t.kw, t.KW
        x6, y4 = t.split(xp, src), t.pooled(self._y)
        rows, cols = t.row_tap, t.col_tap

        def block(index: tuple[slice, ...]) -> None:
            xb, yb = x6[index], y4[index]
            if kw > 1:
                if kh == 1:
                    rowmax = yb[t.new_kh]
                else:  # max over the kw taps of each window row
                    shape = t.shape(xb.shape, without=KW)
                    rowmax = self._local.get(shape, lambda: xp.empty(shape, dtype=self.dtype))
                xp.maximum(xb[cols[0]], xb[cols[1]], out=rowmax)
                for j in range(2, kw):
                    xp.maximum(rowmax, xb[cols[j]], out=rowmax)
                if kh == 1:
                    return
            else:
                rowmax = xb[cols[0]]
            xp.maximum(rowmax[rows[0]], rowmax[rows[1]], out=yb)
            for i in range(2, kh):
                xp.maximum(yb, rowmax[rows[i]], out=yb)

        each_item(t.blocks, block, self._parallel if len(t.blocks) > 1 else None)


class TiledMaxPool2dBackward(MaxPool2dBackward):
    """``MaxPool2dBackward`` with the tiled, cache-blocked path where the windows tile the plane.

    dx is contiguous in ``data_format``.  With ``grad_layout="input"`` (windows that tile the
    plane, no padding) it is instead laid out in memory like the first x the kernel is called
    with, e.g. the (C, N, H, W) or (H, W, N, C) memory order of a strided conv output: dx is then
    written along x's memory and reaches the conv's backward in the conv's own layout (faster
    for both), but the consumers then sum in another order, so their results round differently.
    The tiled path runs when x's innermost memory axis is dx's (the writes run along memory);
    otherwise (e.g. an (H, W, N, C) x for a contiguous dx) the reference path. ``grad_layout="auto"``
    (the cpu backend's kernels): dx in ``data_format`` where the first x's rows run along its innermost
    axis, else laid out like that x, so that the tiled path runs either way (Winograd's (H, W, N, C)
    output: about half the time of the reference path, and it splits over the host threads).
    """

    def _setup(self, *, relu: bool = False, grad_layout: str = "data_format", block_bytes: int | None = BLOCK_BYTES,
               plane_block_bytes: int | None = PLANE_BLOCK_BYTES, parallel: Parallel | None = None) -> None:
        super()._setup(relu=relu)
        self._planes = _Planes(self, plane_block_bytes, parallel)
        self._parallel = parallel
        self._local = PerThread()  # the tiled blocks' scratch (_GradBuffers), per thread that runs blocks
        if grad_layout not in ("data_format", "input", "auto"):
            raise ValueError(f"grad_layout must be 'data_format', 'input' or 'auto', got {grad_layout!r}")
        self._follow_input = "always" if grad_layout == "input" else "where-tiling-needs"
        self.block_bytes = block_bytes
        win = self.window
        # (the per-window hit counts are uint8)
        self._tiled = _Tiling.applies(self) and win.ksize[0] * win.ksize[1] <= 255
        self._layouts: dict[tuple[int, ...], _Tiling | None] = {}  # by x's strides
        self._copies: dict[tuple, Any] = {}  # y / dy copied into the tiling's memory order
        # dx's layout is settled (unless it is to follow the first x; padded: the padded buffer's)
        self._relaid = grad_layout == "data_format" or win.has_padding

    def __call__(self, x: Any, y: Any, dy: Any) -> Any:
        """Return dx (the kernel's own buffer, overwritten by the next call)."""
        self._check("max-pool output y", y, self.out_shape)
        self._check("max-pool output gradient dy", dy, self.out_shape)
        if not self._tiled:
            self._check("pooling input x", x, self.x_shape)
            self._planes.each(lambda index: self._grad_block(x, y, dy, index))
            return self._grad._dx
        src = self._src(x)
        layout = self._layout(src)
        if layout is None:
            return self._tap_by_tap(src, y, dy)
        self._tiled_grad(layout, src, y, dy)
        return self._grad.finish()

    def _grad_block(self, x: Any, y: Any, dy: Any, index: tuple[slice, ...]) -> None:
        """The reference's tap by tap gradient (``_tap_by_tap``) on one block of planes: x padded,
        the gradient zeroed, accumulated and unpadded block by block, while cached."""
        xp, pad, grad, planes = self.xp, self._src, self._grad, self._planes
        if pad._buf is None:
            src = x[index]
        else:
            pad._inner[index] = x[index]
            src = pad._buf[index]
        y, dy = y[index], dy[index]
        shape = tuple(y.shape)
        if self.relu:
            mask = planes.scratch(xp, "mask", shape, bool)
            masked = planes.scratch(xp, "masked", shape, self.dtype)
            xp.greater(y, 0, out=mask)
            xp.multiply(dy, mask, out=masked)
            dy = masked
        if not self.window.tiles:
            grad.buf[index].fill(0)
        self._route(src, y, dy, [dst[index] for dst in self._dst], planes.scratch(xp, "hit", shape, bool),
                    planes.scratch(xp, "free", shape, bool), planes.scratch(xp, "tmp", shape, self.dtype))
        if grad._inner is not None:
            grad._dx[index] = grad._inner[index]

    def _layout(self, src: Any) -> _Tiling | None:
        """The tiling for x's layout, in dx's memory order; None when x's rows do not run along
        dx's innermost axis (the generic path is cheaper than writing dx across its rows)."""
        key = tuple(src.strides)
        if key not in self._layouts:
            order = memory_order(src, self._sp)
            if not self._relaid:  # the first call: dx in x's memory order (auto: where the tiling needs it)
                self._relaid = True
                follow = self._follow_input == "always" or order[-1] != self._grad.order[-1]
                if follow and order != self._grad.order:
                    self._grad = PaddedGrad(self, order)
                    self._dst = [self._grad.buf[idx] for idx in self._tap_idx]
            target = self._grad.order
            self._layouts[key] = _Tiling(self, target, self.block_bytes) if order[-1] == target[-1] else None
        return self._layouts[key]

    def _tiled_grad(self, t: _Tiling, src: Any, y: Any, dy: Any) -> None:
        """Windows that tile the plane: per block, hit = x == y and dx = dy * hit. The blocks (disjoint) run
        over the host threads, each thread with its own buffers."""
        xp = self.xp
        split = self._parallel if len(t.blocks) > 1 else None
        x6, dx6 = t.split(xp, src), t.split(xp, self._grad.buf)
        y4, dy4 = t.pooled(y), t.pooled(dy)
        # y or dy in another memory order than x: one cache-friendly transposing copy first
        if not _c_contiguous(y4):
            y4 = self._relaid_copy(t, "y", y4, split)
        if not _c_contiguous(dy4):
            dy4 = self._relaid_copy(t, "dy", dy4, split)
        each_item(t.blocks, lambda index: self._grad_tile_block(t, x6[index], y4[index], dy4[index], dx6[index]),
                  split)

    def _grad_tile_block(self, t: _Tiling, xb: Any, yb: Any, dyb: Any, dxb: Any) -> None:
        """One block of the tiled gradient (``_tiled_grad``): hits of x against its window's y, the first hit
        of each window where there are ties, dx = dy * hit."""
        xp = self.xp
        block = tuple(xb.shape)
        buf = self._local.get((t.order, block), lambda: _GradBuffers(xp, t, block, self.dtype, self.relu))
        yb, dyb = _gathered(xp, yb, buf.y), _gathered(xp, dyb, buf.dy)
        if self.relu:
            xp.greater(yb, 0, out=buf.maskv, casting="unsafe")
            xp.multiply(dyb, buf.maskv, out=buf.masked)  # dy * (y > 0), as on the generic path
            dyb = buf.masked
            if buf.pos is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    xp.divide(yb, buf.maskv, out=buf.pos)  # y / 1 is y; y / 0 is -inf or NaN
                yb = buf.pos
        self._repeat(t, buf, yb, buf.yw)
        self._repeat(t, buf, dyb, buf.dyw)
        xp.equal(xb, buf.yw_rows, out=buf.hits)
        if self._has_ties(t, buf):
            self._first_hits(t, buf)
        xp.multiply(buf.dyw_rows, buf.hits, out=dxb)

    def _relaid_copy(self, t: _Tiling, name: str, a: Any, split: Parallel | None) -> Any:
        """a (a pooled array in t's memory order, not contiguous) copied into a contiguous buffer."""
        key = (t.order, name)
        if key not in self._copies:
            self._copies[key] = self.xp.empty(a.shape, dtype=self.dtype)
        out = self._copies[key]
        copy_along_memory(self.xp, a, out, self.block_bytes, split)
        return out

    def _repeat(self, t: _Tiling, buf: _GradBuffers, a: Any, out: Any) -> None:
        """out = a (pooled block) with every window's value kw times (along out's kw axis)."""
        xp = self.xp
        if t.kw == 2 and t.inner == 1 and a.dtype.itemsize == 4 and out.flags.c_contiguous:  # (a is contiguous)
            # both 32-bit halves of a uint64 get the bits of a: one contiguous multiply
            xp.multiply(a.view(np.uint32), np.uint64(0x100000001), out=out.reshape(-1).view(np.uint64).reshape(a.shape),
                        dtype=np.uint64)
            return
        for j in range(t.kw):  # per tap a strided copy
            xp.copyto(_tap(out, t.KW - 1, j), a)

    def _has_ties(self, t: _Tiling, buf: _GradBuffers) -> bool:
        """Whether some window of the block (``buf.hits``) has two or more hits."""
        xp, hits = self.xp, buf.hits
        if buf.lanes:
            # (..., oh, kh, ow): a window row's two taps; flattened first, as the last axis may be 1 long
            lanes = hits.reshape(-1).view(np.uint16)
            flag = buf.flag
            xp.equal(lanes, np.uint16(0x0101), out=flag)
            if flag.any():
                return True
            nonzero = buf.nonzero
            xp.not_equal(lanes, np.uint16(0), out=nonzero)
            ow, size = hits.shape[t.KW - 1], lanes.shape[0]
            for d in range(1, t.kh):
                k = size - d * ow
                both = flag[:k]
                xp.logical_and(nonzero[:k], nonzero[d * ow:], out=both)
                xp.logical_and(both, buf.same_window[d - 1][:k], out=both)
                if both.any():
                    return True
            return False
        h8 = hits.view(np.uint8)
        count = buf.rowcount  # hits per column of a window, summed over its rows
        if t.kh == 1:
            xp.copyto(count, _tap(h8, t.KH, 0))
        else:
            xp.add(_tap(h8, t.KH, 0), _tap(h8, t.KH, 1), out=count)
            for i in range(2, t.kh):
                xp.add(count, _tap(h8, t.KH, i), out=count)
        w = buf.count
        kw_axis = t.KW - 1
        if t.kw == 1:
            xp.copyto(w, _tap(count, kw_axis, 0))
        else:
            xp.add(_tap(count, kw_axis, 0), _tap(count, kw_axis, 1), out=w)
            for j in range(2, t.kw):
                xp.add(w, _tap(count, kw_axis, j), out=w)
        xp.greater(w, 1, out=buf.tie)
        return bool(buf.tie.any())

    def _first_hits(self, t: _Tiling, buf: _GradBuffers) -> None:
        """Keep only each window's first hit in row-major window order."""
        xp, hits, free = self.xp, buf.hits, buf.free
        last = t.kh * t.kw - 1
        for k in range(last + 1):
            h = _tap(_tap(hits, t.KW, k % t.kw), t.KH, k // t.kw)
            if k == 0:
                xp.logical_not(h, out=free)
                continue
            xp.logical_and(h, free, out=h)
            if k < last:
                xp.logical_xor(free, h, out=free)


# kernel builders of the op records (flowjob_ops.records.pool) ---------------------------------------
def max_pool_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return TiledMaxPool2d(ctx.xp, x.shape, x.dtype, parallel=host_parallel(ctx), **pool_records.kernel_options(ctx))


def max_pool_grad_kernel(ctx: KernelContext) -> Any:
    """max_pool2d_grad, and max_pool2d_relu_grad (the ReLU mask taken at the pooled size)."""
    x = ctx.inputs[0]
    relu = ctx.op == pool_records.MAX_POOL2D_RELU_GRAD.name
    return TiledMaxPool2dBackward(ctx.xp, x.shape, x.dtype, relu=relu, parallel=host_parallel(ctx),
                                  grad_layout="auto", **pool_records.kernel_options(ctx))


def avg_pool_kernel(ctx: KernelContext) -> Any:
    x = ctx.inputs[0]
    return AvgPool2d(ctx.xp, x.shape, x.dtype, **pool_records.kernel_options(ctx))


def avg_pool_grad_kernel(ctx: KernelContext) -> Any:
    return AvgPool2dBackward(ctx.xp, ctx.attrs["x_shape"], ctx.inputs[0].dtype, **pool_records.kernel_options(ctx))


KERNEL_BUILDERS = {
    pool_records.MAX_POOL2D.name: max_pool_kernel,
    pool_records.MAX_POOL2D_GRAD.name: max_pool_grad_kernel,
    pool_records.MAX_POOL2D_RELU_GRAD.name: max_pool_grad_kernel,
    pool_records.AVG_POOL2D.name: avg_pool_kernel,
    pool_records.AVG_POOL2D_GRAD.name: avg_pool_grad_kernel,
}
