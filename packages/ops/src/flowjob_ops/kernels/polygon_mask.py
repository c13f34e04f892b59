"""Polygons to a binary mask as legacy's ``object_segmentation_polygon_to_mask`` drew them (OpenCV's
``fillPoly`` with 8-connected lines): vertices rounded to the nearest integer (ties to even, as
``std::nearbyint``), each edge drawn with its pixels, the inside filled scanline by scanline with the
even-odd rule over all polygons of one object."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def _line(mask: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> None:
    """An 8-connected line from (x0, y0) to (x1, y1), both ends included, clipped to the mask (Bresenham)."""
    h, w = mask.shape
    steps = max(abs(x1 - x0), abs(y1 - y0))
    if steps == 0:
        if 0 <= x0 < w and 0 <= y0 < h:
            mask[y0, x0] = 1
        return
    t = np.arange(steps + 1)
    # one pixel per step along the major axis; the minor coordinate rounded half away from the start
    xs = x0 + np.floor((x1 - x0) * t / steps + 0.5).astype(np.int64)
    ys = y0 + np.floor((y1 - y0) * t / steps + 0.5).astype(np.int64)
    keep = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    mask[ys[keep], xs[keep]] = 1


def _fill(mask: np.ndarray, polygons: Sequence[np.ndarray]) -> None:
    """The pixels whose centre lies inside (even-odd over every edge of ``polygons``), row by row."""
    h, w = mask.shape
    edges = []
    for pts in polygons:
        nxt = np.roll(pts, -1, axis=0)
        for (xa, ya), (xb, yb) in zip(pts, nxt):
            if ya != yb:
                edges.append((xa, ya, xb, yb))
    if not edges:
        return
    e = np.asarray(edges, dtype=np.float64)
    low, high = np.minimum(e[:, 1], e[:, 3]), np.maximum(e[:, 1], e[:, 3])
    for y in range(max(int(low.min()), 0), min(int(high.max()), h - 1) + 1):
        on = (low <= y) & (y < high)  # half-open: a vertex shared by two edges counts once
        if not on.any():
            continue
        a = e[on]
        xs = np.sort(a[:, 0] + (y - a[:, 1]) * (a[:, 2] - a[:, 0]) / (a[:, 3] - a[:, 1]))
        for left, right in zip(xs[0::2], xs[1::2]):
            first, last = max(int(np.ceil(left)), 0), min(int(np.floor(right)), w - 1)
            if first <= last:
                mask[y, first: last + 1] = 1


def polygons_to_mask(polygons: Sequence[np.ndarray], height: int, width: int) -> np.ndarray:
    """An int8 ``(height, width)`` mask of one object's polygons (each an (n, 2) array of x, y points)."""
    mask = np.zeros((height, width), dtype=np.int8)
    rounded = [np.rint(np.asarray(p, dtype=np.float64)).astype(np.int64) for p in polygons]
    _fill(mask, rounded)
    for pts in rounded:
        for (xa, ya), (xb, yb) in zip(pts, np.roll(pts, -1, axis=0)):
            _line(mask, int(xa), int(ya), int(xb), int(yb))
    return mask
