"""Hypothesis strategies for op tests that construct inputs away from kinks and ties.

Construct, don't filter: ``assume(...)`` on a kink or a tie rejects most of what
hypothesis draws (it favours simple values such as 0) and fails ``filter_too_much``.
These strategies build values that satisfy the constraint by construction.
Values are float64 (gradients are checked in float64); cast in the test if needed.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

Shape = tuple[int, ...]


def _band_edge(point: float, gap: float, side: float) -> float:
    """The float nearest ``point + side * gap`` with ``abs(x - point) >= gap`` in float arithmetic."""
    x = point + side * gap
    while abs(x - point) < gap:  # rounding may land a hair inside the band; step outwards
        x = float(np.nextafter(x, side * math.inf))
    return x


def allowed_intervals(points: Sequence[float], gap: float, low: float, high: float) -> list[tuple[float, float]]:
    """Closed intervals covering exactly ``[low, high]`` minus the open bands ``|x - p| < gap``."""
    if not low <= high:
        raise ValueError(f"away_from: low {low} is above high {high}")
    if gap < 0:
        raise ValueError(f"away_from: gap must be >= 0, got {gap}")
    if gap == 0:
        return [(float(low), float(high))]
    intervals = []
    start = float(low)
    for p in sorted(float(p) for p in points):
        end = _band_edge(p, gap, -1.0)
        if end >= start:
            intervals.append((start, min(end, float(high))))
        start = max(start, _band_edge(p, gap, 1.0))
    if start <= high:
        intervals.append((start, float(high)))
    return [(a, b) for a, b in intervals if a <= b]


def _is_subnormal(x: float) -> bool:
    return x != 0.0 and bool(abs(x) < np.finfo(np.float64).tiny)


def _floats(a: float, b: float) -> st.SearchStrategy[float]:
    return st.floats(a, b, allow_nan=False, allow_infinity=False,
                     allow_subnormal=_is_subnormal(a) or _is_subnormal(b))


def away_from(points: Sequence[float] = (0.0,), gap: float = 0.1, low: float = -3.0,
              high: float = 3.0) -> st.SearchStrategy[float]:
    """Floats in ``[low, high]`` with ``|x - p| >= gap`` for every ``p`` in ``points`` (relu at 0, abs, ...).

    Built by picking one of the allowed intervals, then a value inside it: nothing is filtered.
    """
    intervals = allowed_intervals(points, gap, low, high)
    if not intervals:
        raise ValueError(f"away_from: no value in [{low}, {high}] keeps a gap of {gap} from {list(points)}")
    return st.one_of([_floats(a, b) for a, b in intervals])


def arrays(shape: Shape | st.SearchStrategy[Shape], elements: st.SearchStrategy[Any] | None = None,
           dtype: Any = np.float64) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``shape`` (a tuple or a strategy); elements default to floats in [-3, 3]."""
    dtype = np.dtype(dtype)
    if elements is None:
        elements = st.floats(-3.0, 3.0, width=32 if dtype == np.float32 else 64, allow_subnormal=False)
    return hnp.arrays(dtype, shape, elements=elements)


def array_away_from(shape: Shape | st.SearchStrategy[Shape], points: Sequence[float] = (0.0,), gap: float = 0.1,
                    low: float = -3.0, high: float = 3.0) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays whose every element keeps ``gap`` from ``points`` (see ``away_from``)."""
    return arrays(shape, away_from(points, gap, low, high))


def positive_arrays(shape: Shape | st.SearchStrategy[Shape], low: float = 0.5,
                    high: float = 3.0) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays in ``[low, high]``, ``low > 0``: inputs of log, sqrt, divide."""
    if not 0 < low <= high:
        raise ValueError(f"positive_arrays: need 0 < low <= high, got low={low}, high={high}")
    return arrays(shape, _floats(low, high))


def distinct_values(shape: Shape | st.SearchStrategy[Shape], low: float = -1.0, high: float = 1.0,
                    min_gap: float | None = None) -> st.SearchStrategy[np.ndarray]:
    """A shuffled ``arange`` rescaled into ``(low, high)``: no ties anywhere (max, max-pool, sort).

    Neighbouring values differ by ``(high - low) / size``; ``min_gap`` asks for at least that
    spacing (up to rounding) and is an error when the shape holds too many elements for it.
    """
    if not low < high:
        raise ValueError(f"distinct_values: need low < high, got low={low}, high={high}")

    def check(size: int) -> float:
        spacing = (high - low) / max(size, 1)
        if min_gap is not None and spacing < min_gap:
            raise ValueError(f"distinct_values: {size} values in ({low}, {high}) are {spacing:g} apart, "
                             f"less than min_gap={min_gap:g}")
        return spacing

    if not isinstance(shape, st.SearchStrategy):
        check(math.prod(shape))  # fail when the strategy is made, not when it is drawn

    @st.composite
    def build(draw: st.DrawFn) -> np.ndarray:
        concrete = tuple(draw(shape)) if isinstance(shape, st.SearchStrategy) else tuple(shape)
        size = math.prod(concrete)
        spacing = check(size)
        order = np.asarray(draw(st.permutations(range(size))), dtype=np.float64)
        return (low + (order + 0.5) * spacing).reshape(concrete)

    return build()


def small_shapes(min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> st.SearchStrategy[Shape]:
    """Shapes with ``min_dims..max_dims`` axes of ``1..max_side`` elements each."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=max_side)


def broadcastable_pair(min_dims: int = 0, max_dims: int = 3,
                       max_side: int = 4) -> st.SearchStrategy[tuple[Shape, Shape]]:
    """Two shapes that broadcast together (``np.broadcast_shapes`` accepts them): binary ops."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=min_dims, max_dims=max_dims, min_side=1,
                                             max_side=max_side).map(lambda b: (b.input_shapes[0], b.input_shapes[1]))


__all__ = ["allowed_intervals", "array_away_from", "arrays", "away_from", "broadcastable_pair",
           "distinct_values", "positive_arrays", "small_shapes"]
