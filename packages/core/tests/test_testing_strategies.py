"""The kit's strategies construct values outside the excluded bands: checked by hypothesis itself."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowjob_core.testing import strategies as fst

points_st = st.lists(st.floats(-4.0, 4.0, allow_subnormal=False), min_size=0, max_size=4)
gaps_st = st.floats(1e-3, 0.5, allow_subnormal=False)


@given(data=st.data(), points=points_st, gap=gaps_st)
def test_away_from_never_enters_a_band(data: st.DataObject, points: list[float], gap: float) -> None:
    x = data.draw(fst.away_from(points, gap, low=-3.0, high=3.0))  # 4 bands of width <= 1 never cover [-3, 3]
    assert -3.0 <= x <= 3.0
    for p in points:
        assert abs(x - p) >= gap, (x, p, gap)


def test_away_from_reaches_every_allowed_interval() -> None:
    intervals = fst.allowed_intervals([0.0, 1.0], 0.25, -1.0, 2.0)
    assert intervals == [(-1.0, -0.25), (0.25, 0.75), (1.25, 2.0)]
    seen = set()

    @settings(max_examples=60)
    @given(fst.away_from((0.0, 1.0), 0.25, -1.0, 2.0))
    def collect(x: float) -> None:
        seen.add(next(i for i, (a, b) in enumerate(intervals) if a <= x <= b))

    collect()
    assert seen == {0, 1, 2}


def test_away_from_rejects_an_empty_range() -> None:
    with pytest.raises(ValueError, match="no value"):
        fst.away_from((0.0,), gap=2.0, low=-1.0, high=1.0)


@given(x=fst.array_away_from(fst.small_shapes(), points=(0.0, 0.5), gap=0.1))
def test_array_away_from_keeps_every_element_out(x: np.ndarray) -> None:
    assert x.dtype == np.float64
    assert np.all(np.abs(x) >= 0.1) and np.all(np.abs(x - 0.5) >= 0.1)
    assert np.all((x >= -3.0) & (x <= 3.0))


@given(x=fst.positive_arrays(fst.small_shapes(), low=0.5, high=3.0))
def test_positive_arrays_stay_in_range(x: np.ndarray) -> None:
    assert np.all((x >= 0.5) & (x <= 3.0))


@given(x=fst.distinct_values(fst.small_shapes(max_side=5), low=-1.0, high=1.0))
def test_distinct_values_have_no_ties(x: np.ndarray) -> None:
    flat = np.sort(x.ravel())
    assert np.all((flat > -1.0) & (flat < 1.0))
    assert len(np.unique(flat)) == flat.size
    if flat.size > 1:
        assert np.min(np.diff(flat)) >= (2.0 / flat.size) * (1 - 1e-9)


@given(x=fst.distinct_values((4, 4), min_gap=0.1))
def test_distinct_values_honour_min_gap(x: np.ndarray) -> None:
    assert x.shape == (4, 4)
    assert np.min(np.diff(np.sort(x.ravel()))) >= 0.1


def test_distinct_values_refuse_an_impossible_gap() -> None:
    with pytest.raises(ValueError, match="min_gap"):
        fst.distinct_values((10, 10), min_gap=0.1)


@given(shape=fst.small_shapes(min_dims=2, max_dims=3, max_side=4))
def test_small_shapes_bounds(shape: tuple[int, ...]) -> None:
    assert 2 <= len(shape) <= 3 and all(1 <= d <= 4 for d in shape)


@given(pair=fst.broadcastable_pair())
def test_broadcastable_pair_broadcasts(pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = pair
    result = np.broadcast_shapes(a, b)
    assert len(result) == max(len(a), len(b))


@given(x=fst.arrays((3,), dtype=np.float32))
def test_arrays_float32_elements_are_representable(x: np.ndarray) -> None:
    assert x.dtype == np.float32 and np.all(np.abs(x) <= 3.0)


def test_band_edges_hold_in_float_arithmetic() -> None:
    # (0.7 + 0.1) - 0.7 < 0.1 in binary floats: a naive edge p + gap lies inside the band
    assert abs((0.7 + 0.1) - 0.7) < 0.1
    for p in (0.3, -0.7, 0.7, 1e-3, 2.5):
        for gap in (0.1, 0.2, 1e-4):
            intervals = fst.allowed_intervals([p], gap, -3.0, 3.0)
            assert len(intervals) == 2
            for edge in (intervals[0][1], intervals[1][0]):
                assert abs(edge - p) >= gap and math.isfinite(edge)
