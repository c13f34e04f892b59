"""Op cases of ``deconv2d`` (legacy ``flow.nn.conv2d_transpose``). op_cases.py appends ``CASES``.

The reference scatters every value element through the filter taps into the output (loops over
plain Python lists), written independently of the kernels' GEMM + col2im.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from flowjob_ops.kernels import window2d as pads

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _array(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-1.0, 1.0, allow_subnormal=False)))


def deconv_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from(["NCHW", "NHWC"]))
    groups = draw(st.sampled_from([1, 1, 2]))
    n, cg, fg = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    c, f = cg * groups, fg * groups  # c: output channels, f: value channels
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = draw(st.sampled_from([1, 2, (2, 1)]))
    dilations = draw(st.sampled_from([None, 1, 2]))
    padding = draw(st.sampled_from(["VALID", "SAME", "SAME_LOWER", ((1, 0), (0, 1))]))
    d = 1 if dilations is None else dilations
    h, w = draw(st.integers((kh - 1) * d + 1, 6)), draw(st.integers((kw - 1) * d + 1, 6))
    x_shape = (n, c, h, w) if fmt == "NCHW" else (n, h, w, c)
    resolved, (oh, ow) = pads.resolve_padding(padding, (h, w), (kh, kw), strides, d, fmt)
    value_shape = (n, f, oh, ow) if fmt == "NCHW" else (n, oh, ow, f)
    w_shape = (f, cg, kh, kw) if fmt == "NCHW" else (f, kh, kw, cg)
    attrs = {"strides": strides, "padding": padding, "data_format": fmt, "dilations": dilations,
             "groups": groups, "x_shape": x_shape}
    return [_array(draw, value_shape), _array(draw, w_shape)], attrs


def deconv_ref(value: np.ndarray, w: np.ndarray, strides: Any, padding: Any, data_format: str, dilations: Any,
               groups: int, x_shape: tuple[int, ...]) -> np.ndarray:
    nchw = data_format == "NCHW"
    v = value if nchw else value.transpose(0, 3, 1, 2)
    k = w if nchw else w.transpose(0, 3, 1, 2)  # (F, C/groups, kh, kw)
    n, c, h, wd = x_shape if nchw else (x_shape[0], x_shape[3], x_shape[1], x_shape[2])
    sh, sw = (strides, strides) if isinstance(strides, int) else strides
    d = 1 if dilations is None else dilations
    f, cg, kh, kw = k.shape
    fg = f // groups
    (top, _), (left, _) = pads.resolve_padding(padding, (h, wd), (kh, kw), (sh, sw), d, data_format)[0]
    out = [[[[0.0] * wd for _ in range(h)] for _ in range(c)] for _ in range(n)]
    vl, kl = v.astype(np.float64).tolist(), k.astype(np.float64).tolist()
    for b, fo, oh, ow in itertools.product(range(n), range(f), range(v.shape[2]), range(v.shape[3])):
        group = fo // fg
        for ci, i, j in itertools.product(range(cg), range(kh), range(kw)):
            y, x = oh * sh - top + i * d, ow * sw - left + j * d
            if 0 <= y < h and 0 <= x < wd:
                out[b][group * cg + ci][y][x] += vl[b][fo][oh][ow] * kl[fo][ci][i][j]
    result = np.array(out)
    return result if nchw else result.transpose(0, 2, 3, 1)


CASES = [
    OpCase("deconv2d", deconv_case, reference=deconv_ref),
]
