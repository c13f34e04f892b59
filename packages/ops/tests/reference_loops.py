"""Naive float64 references for the conv / pool kernels: plain nested loops.

Written to be obviously correct, not fast: every output element is computed
from its definition, padding is handled by skipping out-of-range input
positions (no padded copies), and gradients accumulate the contribution of
each term of the forward sum.  All functions take explicit pads
``((top, bottom), (left, right))``.  ``conv2d_taps_ref`` is a vectorized
(per-tap einsum) reference for shapes too large for the loops; the tests check
it against the loops first.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

Pair = tuple[int, int]
Pads = tuple[Pair, Pair]


def _to_nchw(a: np.ndarray, data_format: str) -> np.ndarray:
    return a if data_format == "NCHW" else a.transpose(0, 3, 1, 2)


def _from_nchw(a: np.ndarray, data_format: str) -> np.ndarray:
    return a if data_format == "NCHW" else a.transpose(0, 2, 3, 1)


def _w_to_fchw(w: np.ndarray, data_format: str) -> np.ndarray:
    """Weights as (F, C/groups, kh, kw) whatever the data format."""
    return w if data_format == "NCHW" else w.transpose(0, 3, 1, 2)


def _w_from_fchw(w: np.ndarray, data_format: str) -> np.ndarray:
    return w if data_format == "NCHW" else w.transpose(0, 2, 3, 1)


def out_size(size: int, k: int, s: int, d: int, before: int, after: int) -> int:
    return (size + before + after - ((k - 1) * d + 1)) // s + 1


def conv2d_ref(
    x: np.ndarray, w: np.ndarray, strides: Pair, pads: Pads, dilation: Pair, groups: int, data_format: str
) -> np.ndarray:
    """y[n, f, oh, ow] = sum_{c in group(f), i, j} x[n, c, oh*sh - top + i*dh, ow*sw - left + j*dw] * w[f, c, i, j]."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format).tolist()
    wf = _w_to_fchw(np.asarray(w, np.float64), data_format).tolist()
    N, H, W = len(xn), len(xn[0][0]), len(xn[0][0][0])
    F, Cg, kh, kw = len(wf), len(wf[0]), len(wf[0][0]), len(wf[0][0][0])
    (sh, sw), (dh, dw), ((t, b), (l, r)) = strides, dilation, pads
    OH, OW = out_size(H, kh, sh, dh, t, b), out_size(W, kw, sw, dw, l, r)
    Fg = F // groups
    y = np.zeros((N, F, OH, OW))
    for n in range(N):
        for f in range(F):
            g = f // Fg
            for oh in range(OH):
                for ow in range(OW):
                    acc = 0.0
                    for cg in range(Cg):
                        c = g * Cg + cg
                        for i in range(kh):
                            h = oh * sh - t + i * dh
                            if not 0 <= h < H:
                                continue
                            for j in range(kw):
                                v = ow * sw - l + j * dw
                                if 0 <= v < W:
                                    acc += xn[n][c][h][v] * wf[f][cg][i][j]
                    y[n, f, oh, ow] = acc
    return _from_nchw(y, data_format)


def conv2d_grads_ref(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    strides: Pair,
    pads: Pads,
    dilation: Pair,
    groups: int,
    data_format: str,
) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dw): every term x*w of the forward sum adds dy*w to dx and dy*x to dw."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format).tolist()
    wf = _w_to_fchw(np.asarray(w, np.float64), data_format).tolist()
    dyn = _to_nchw(np.asarray(dy, np.float64), data_format).tolist()
    N, C, H, W = len(xn), len(xn[0]), len(xn[0][0]), len(xn[0][0][0])
    F, Cg, kh, kw = len(wf), len(wf[0]), len(wf[0][0]), len(wf[0][0][0])
    (sh, sw), (dh, dw), ((t, b), (l, r)) = strides, dilation, pads
    OH, OW = out_size(H, kh, sh, dh, t, b), out_size(W, kw, sw, dw, l, r)
    Fg = F // groups
    dx = np.zeros((N, C, H, W))
    dwf = np.zeros((F, Cg, kh, kw))
    for n in range(N):
        for f in range(F):
            g = f // Fg
            for oh in range(OH):
                for ow in range(OW):
                    gy = dyn[n][f][oh][ow]
                    for cg in range(Cg):
                        c = g * Cg + cg
                        for i in range(kh):
                            h = oh * sh - t + i * dh
                            if not 0 <= h < H:
                                continue
                            for j in range(kw):
                                v = ow * sw - l + j * dw
                                if 0 <= v < W:
                                    dx[n, c, h, v] += gy * wf[f][cg][i][j]
                                    dwf[f, cg, i, j] += gy * xn[n][c][h][v]
    return _from_nchw(dx, data_format), _w_from_fchw(dwf, data_format)


def conv2d_taps_ref(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray | None,
    strides: Pair,
    pads: Pads,
    dilation: Pair,
    groups: int,
    data_format: str,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Vectorized reference (loops over taps and groups only): (y, dx, dw); dx, dw None without dy."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format)
    wf = _w_to_fchw(np.asarray(w, np.float64), data_format)
    N, C, H, W = xn.shape
    F, Cg, kh, kw = wf.shape
    (sh, sw), (dh, dw), ((t, b), (l, r)) = strides, dilation, pads
    OH, OW = out_size(H, kh, sh, dh, t, b), out_size(W, kw, sw, dw, l, r)
    Fg = F // groups
    xp = np.pad(xn, ((0, 0), (0, 0), (t, b), (l, r)))
    y = np.zeros((N, F, OH, OW))
    dyn = None if dy is None else _to_nchw(np.asarray(dy, np.float64), data_format)
    dxp = np.zeros_like(xp)
    dwf = np.zeros_like(wf)
    for i in range(kh):
        for j in range(kw):
            hs = slice(i * dh, i * dh + (OH - 1) * sh + 1, sh)
            vs = slice(j * dw, j * dw + (OW - 1) * sw + 1, sw)
            for g in range(groups):
                cs, fs = slice(g * Cg, (g + 1) * Cg), slice(g * Fg, (g + 1) * Fg)
                xs = xp[:, cs, hs, vs]
                y[:, fs] += np.einsum("nchw,fc->nfhw", xs, wf[fs, :, i, j])
                if dyn is not None:
                    dxp[:, cs, hs, vs] += np.einsum("nfhw,fc->nchw", dyn[:, fs], wf[fs, :, i, j])
                    dwf[fs, :, i, j] += np.einsum("nfhw,nchw->fc", dyn[:, fs], xs)
    if dyn is None:
        return _from_nchw(y, data_format), None, None
    dx = dxp[:, :, t:t + H, l:l + W]
    return _from_nchw(y, data_format), _from_nchw(dx, data_format), _w_from_fchw(dwf, data_format)


def _pool_windows(
    H: int, W: int, ksize: Pair, strides: Pair, pads: Pads
) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """(oh, ow, real input positions of the window in row-major order) per output pixel."""
    (kh, kw), (sh, sw), ((t, b), (l, r)) = ksize, strides, pads
    OH, OW = out_size(H, kh, sh, 1, t, b), out_size(W, kw, sw, 1, l, r)
    out = []
    for oh in range(OH):
        for ow in range(OW):
            cells = [
                (oh * sh - t + i, ow * sw - l + j)
                for i in range(kh)
                for j in range(kw)
                if 0 <= oh * sh - t + i < H and 0 <= ow * sw - l + j < W
            ]
            out.append((oh, ow, cells))
    return out


def _pool_out_shape(x: np.ndarray, ksize: Pair, strides: Pair, pads: Pads) -> tuple[int, int, int, int]:
    N, C, H, W = x.shape
    (kh, kw), (sh, sw), ((t, b), (l, r)) = ksize, strides, pads
    return (N, C, out_size(H, kh, sh, 1, t, b), out_size(W, kw, sw, 1, l, r))


def max_pool_ref(x: np.ndarray, ksize: Pair, strides: Pair, pads: Pads, data_format: str) -> np.ndarray:
    """Max over the real elements of each window (-inf if there are none)."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format)
    y = np.full(_pool_out_shape(xn, ksize, strides, pads), -np.inf)
    N, C, H, W = xn.shape
    for oh, ow, cells in _pool_windows(H, W, ksize, strides, pads):
        for n in range(N):
            for c in range(C):
                for h, v in cells:
                    y[n, c, oh, ow] = max(y[n, c, oh, ow], xn[n, c, h, v])
    return _from_nchw(y, data_format)


def max_pool_grad_ref(
    x: np.ndarray, dy: np.ndarray, ksize: Pair, strides: Pair, pads: Pads, data_format: str
) -> np.ndarray:
    """dx: each window's dy goes to its first maximal element in row-major window order."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format)
    dyn = _to_nchw(np.asarray(dy, np.float64), data_format)
    dx = np.zeros(xn.shape)
    N, C, H, W = xn.shape
    for oh, ow, cells in _pool_windows(H, W, ksize, strides, pads):
        for n in range(N):
            for c in range(C):
                best = None
                for h, v in cells:
                    if best is None or xn[n, c, h, v] > xn[n, c, best[0], best[1]]:
                        best = (h, v)  # strict '>' keeps the first of equal maxima
                if best is not None:
                    dx[n, c, best[0], best[1]] += dyn[n, c, oh, ow]
    return _from_nchw(dx, data_format)


def avg_pool_ref(x: np.ndarray, ksize: Pair, strides: Pair, pads: Pads, data_format: str) -> np.ndarray:
    """Mean over the real elements of each window (padding excluded; 0 if none)."""
    xn = _to_nchw(np.asarray(x, np.float64), data_format)
    y = np.zeros(_pool_out_shape(xn, ksize, strides, pads))
    N, C, H, W = xn.shape
    for oh, ow, cells in _pool_windows(H, W, ksize, strides, pads):
        for n in range(N):
            for c in range(C):
                if cells:
                    y[n, c, oh, ow] = sum(xn[n, c, h, v] for h, v in cells) / len(cells)
    return _from_nchw(y, data_format)


def avg_pool_grad_ref(
    x_shape: Sequence[int], dy: np.ndarray, ksize: Pair, strides: Pair, pads: Pads, data_format: str
) -> np.ndarray:
    """dx: each window's dy / count added to each of its real elements."""
    dyn = _to_nchw(np.asarray(dy, np.float64), data_format)
    N, C = dyn.shape[:2]
    H, W = (x_shape[2], x_shape[3]) if data_format == "NCHW" else (x_shape[1], x_shape[2])
    dx = np.zeros((N, C, H, W))
    for oh, ow, cells in _pool_windows(H, W, ksize, strides, pads):
        for n in range(N):
            for c in range(C):
                for h, v in cells:
                    dx[n, c, h, v] += dyn[n, c, oh, ow] / len(cells)
    return _from_nchw(dx, data_format)
