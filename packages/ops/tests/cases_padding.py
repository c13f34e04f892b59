"""Op cases of the padding records: pad (constant_value around every axis) and pad2d (reflection or
replication of the last two axes) with its gradient op. op_cases.py appends ``CASES`` to its table.

References are plain numpy: ``np.pad``'s own constant, reflect and edge modes.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


_shape, _array = base._shape, base._array


def pad_case(draw: Draw) -> Case:
    shape = _shape(draw)
    before = tuple(draw(st.integers(0, 2)) for _ in shape)
    after = tuple(draw(st.integers(0, 2)) for _ in shape)
    value = draw(st.sampled_from([0, 1.5, -2]))
    return [_array(draw, shape)], {"padding_before": before, "padding_after": after, "constant_value": value}


def pad_ref(x: np.ndarray, padding_before: Any, padding_after: Any, constant_value: Any) -> np.ndarray:
    out = np.full([d + b + a for d, b, a in zip(x.shape, padding_before, padding_after)], constant_value, x.dtype)
    for index in itertools.product(*(range(d) for d in x.shape)):
        out[tuple(i + b for i, b in zip(index, padding_before))] = x[index]
    return out


_NP_MODE = {"reflect": "reflect", "replicate": "edge"}


def _pad2d_attrs(draw: Draw, h: int, w: int) -> dict:
    padding = (draw(st.integers(0, w - 1)), draw(st.integers(0, w - 1)), draw(st.integers(0, h - 1)),
               draw(st.integers(0, h - 1)))
    return {"mode": draw(st.sampled_from(sorted(_NP_MODE))), "padding": padding}


def pad2d_case(draw: Draw) -> Case:
    n, c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return [_array(draw, (n, c, h, w))], _pad2d_attrs(draw, h, w)


def _np_pad_width(padding: tuple[int, int, int, int]) -> tuple[tuple[int, int], ...]:
    left, right, top, bottom = padding
    return (0, 0), (0, 0), (top, bottom), (left, right)


def pad2d_ref(x: np.ndarray, mode: str, padding: tuple[int, int, int, int]) -> np.ndarray:
    return np.pad(x, _np_pad_width(padding), mode=_NP_MODE[mode])


def pad2d_grad_case(draw: Draw) -> Case:
    n, c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    attrs = _pad2d_attrs(draw, h, w)
    left, right, top, bottom = attrs["padding"]
    return [_array(draw, (n, c, h + top + bottom, w + left + right))], {**attrs, "shape": (n, c, h, w)}


def pad2d_grad_ref(dy: np.ndarray, mode: str, padding: tuple[int, int, int, int],
                   shape: tuple[int, ...]) -> np.ndarray:
    h, w = shape[2], shape[3]
    # where each padded element came from: np.pad applied to the flat positions of the plane
    source = np.pad(np.arange(h * w).reshape(1, 1, h, w), _np_pad_width(padding), mode=_NP_MODE[mode])[0, 0]
    out = np.zeros(shape, dy.dtype)
    for i, j in itertools.product(*(range(d) for d in source.shape)):
        out[:, :, source[i, j] // w, source[i, j] % w] += dy[:, :, i, j]
    return out


CASES = [
    OpCase("pad", pad_case, reference=pad_ref),
    OpCase("pad2d", pad2d_case, reference=pad2d_ref),
    OpCase("pad2d_grad", pad2d_grad_case, reference=pad2d_grad_ref),
]
