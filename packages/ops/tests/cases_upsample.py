"""Op cases of ``upsample`` (nearest / bilinear) and its gradient op; the reference reads each output's
source pixels. op_cases.py appends ``CASES``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def upsample_case(draw: Draw) -> Case:
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    interpolation = draw(st.sampled_from(["nearest", "bilinear"]))
    align = interpolation == "bilinear" and draw(st.booleans())
    attrs = {"height_scale": float(draw(st.sampled_from([1, 2, 3]))),
             "width_scale": float(draw(st.sampled_from([1, 2, 2.5]))), "align_corners": align,
             "interpolation": interpolation}
    return [base._array(draw, shape)], attrs


def _source(o: int, size: int, out_size: int, scale: float, align: bool, interpolation: str) -> list[tuple[int, float]]:
    """The input positions output ``o`` reads along one axis, with weights (legacy's index rules)."""
    if interpolation == "nearest":
        return [(min(int(math.floor((o + 0.5) / scale)), size - 1), 1.0)]
    if align:
        position = o * (size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        position = max((o + 0.5) / scale - 0.5, 0.0)
    low = min(int(math.floor(position)), size - 1)
    high = min(int(math.ceil(position)), size - 1)
    frac = position - math.floor(position)
    return [(low, 1.0 - frac), (high, frac)]


def upsample_ref(x: np.ndarray, height_scale: float, width_scale: float, align_corners: bool,
                 interpolation: str) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = int(height_scale * h), int(width_scale * w)
    y = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            for hi, hw in _source(i, h, oh, height_scale, align_corners, interpolation):
                for wi, ww in _source(j, w, ow, width_scale, align_corners, interpolation):
                    y[:, :, i, j] += hw * ww * x[:, :, hi, wi]
    return y


def upsample_grad_case(draw: Draw) -> Case:
    (x,), attrs = upsample_case(draw)
    dy_shape = upsample_ref(x, **attrs).shape
    return [base._array(draw, dy_shape), x], attrs


def upsample_grad_ref(dy: np.ndarray, x: np.ndarray, height_scale: float, width_scale: float, align_corners: bool,
                      interpolation: str) -> np.ndarray:
    _, _, h, w = x.shape
    _, _, oh, ow = dy.shape
    dx = np.zeros_like(x)
    for i in range(oh):
        for j in range(ow):
            for hi, hw in _source(i, h, oh, height_scale, align_corners, interpolation):
                for wi, ww in _source(j, w, ow, width_scale, align_corners, interpolation):
                    dx[:, :, hi, wi] += hw * ww * dy[:, :, i, j]
    return dx


CASES = [
    OpCase("upsample", upsample_case, reference=upsample_ref),
    OpCase("upsample_grad", upsample_grad_case, reference=upsample_grad_ref, wrt=()),
]
