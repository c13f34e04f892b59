"""Op cases of the 3-D convolution and pooling records and their gradient ops. op_cases.py appends ``CASES``.

The references (``conv_loops``, ``pool_loops``, for any number of spatial axes) loop over output positions
(each window's inner product or reduction in numpy) on an explicitly padded channels-first copy,
independently of the kernels' im2col GEMM and tap-by-tap slices; the pads come from
``kernels.window2d._same_pads``, the 2-D kernels' reading of "SAME".
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from flowjob_ops.kernels.window2d import _same_pads

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _array(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-1.0, 1.0, allow_subnormal=False)))


def _per_axis(v: Any, rank: int = 3) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * rank
    return tuple(v) * rank if len(v) == 1 else tuple(v)


def resolve(padding: Any, size: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...],
            d: tuple[int, ...]) -> list[tuple[int, int]]:
    """Spatial (before, after) pads of a padding attribute (a mode or one spatial pair per axis)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(size)
        return [_same_pads(mode, size[i], k[i], s[i], d[i]) for i in range(len(size))]
    return [tuple(p) for p in padding]  # type: ignore[misc]


def _to_first(a: np.ndarray, fmt: str) -> np.ndarray:
    return a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1)) if fmt.endswith("C") else a


def _from_first(a: np.ndarray, fmt: str) -> np.ndarray:
    return a.transpose(0, *range(2, a.ndim), 1) if fmt.endswith("C") else a


# convolution ------------------------------------------------------------------------------------
def conv_loops(x: np.ndarray, w: np.ndarray, dy: np.ndarray | None, strides: Any, padding: Any, data_format: str,
               dilations: Any, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, dx, dw) in data_format, dy the output gradient (ones when None), by a loop over output positions."""
    xf = _to_first(x, data_format).astype(np.float64)
    wf = _to_first(w, data_format).astype(np.float64)  # (F, C/groups, *ksize)
    n, c, *size = xf.shape
    f, cg, *k = wf.shape
    rank = len(size)
    s, d = _per_axis(strides, rank), _per_axis(1 if dilations is None else dilations, rank)
    pads = resolve(padding, tuple(size), tuple(k), s, d)
    xp = np.pad(xf, [(0, 0), (0, 0), *pads])
    out = [(size[i] + sum(pads[i]) - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(rank)]
    y = np.zeros((n, f, *out))
    g_dy = np.ones_like(y) if dy is None else _to_first(dy, data_format).astype(np.float64)
    dxp, dw = np.zeros_like(xp), np.zeros_like(wf)
    fg = f // groups
    for g in range(groups):
        fs, cs = slice(g * fg, (g + 1) * fg), slice(g * cg, (g + 1) * cg)
        for o in itertools.product(*(range(v) for v in out)):
            win = (slice(None), cs, *(slice(o[i] * s[i], o[i] * s[i] + (k[i] - 1) * d[i] + 1, d[i])
                                      for i in range(rank)))
            patch = xp[win]  # (N, C/groups, *ksize)
            taps = "ijk"[:rank]
            y[(slice(None), fs, *o)] = np.einsum(f"nc{taps},fc{taps}->nf", patch, wf[fs])
            grad = g_dy[(slice(None), fs, *o)]  # (N, F/groups)
            dxp[win] += np.einsum(f"nf,fc{taps}->nc{taps}", grad, wf[fs])
            dw[fs] += np.einsum(f"nf,nc{taps}->fc{taps}", grad, patch)
    inner = (slice(None), slice(None), *(slice(b, b + sz) for (b, _), sz in zip(pads, size)))
    return _from_first(y, data_format), _from_first(dxp[inner], data_format), _from_first(dw, data_format)


def conv3d_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from(["NCDHW", "NDHWC"]))
    groups = draw(st.sampled_from([1, 1, 2]))
    n, cg, fg = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    c, f = cg * groups, fg * groups
    k = tuple(draw(st.integers(1, 3)) for _ in range(3))
    strides = draw(st.sampled_from([1, 2, (1, 2, 1), [2]]))
    dilations = draw(st.sampled_from([None, 1, (1, 2, 1)]))
    padding = draw(st.sampled_from(["VALID", "SAME", "SAME_LOWER", "SAME_UPPER", ((1, 0), (0, 1), (1, 1))]))
    d = _per_axis(1 if dilations is None else dilations)
    size = tuple(draw(st.integers((k[i] - 1) * d[i] + 1, max(4, (k[i] - 1) * d[i] + 1))) for i in range(3))
    x_shape = (n, c, *size) if fmt == "NCDHW" else (n, *size, c)
    w_shape = (f, cg, *k) if fmt == "NCDHW" else (f, *k, cg)
    attrs = {"strides": strides, "padding": padding, "data_format": fmt, "dilations": dilations, "groups": groups}
    return [_array(draw, x_shape), _array(draw, w_shape)], attrs


def conv3d_ref(x: np.ndarray, w: np.ndarray, **attrs: Any) -> np.ndarray:
    return conv_loops(x, w, None, **attrs)[0]


def conv3d_grad_data_case(draw: Draw) -> Case:
    (x, w), attrs = conv3d_case(draw)
    y = conv3d_ref(x, w, **attrs)
    return [_array(draw, y.shape), w], attrs | {"x_shape": x.shape, "w_shape": w.shape}


def conv3d_grad_data_ref(dy: np.ndarray, w: np.ndarray, x_shape: Any, w_shape: Any, **attrs: Any) -> np.ndarray:
    return conv_loops(np.zeros(x_shape), w, dy, **attrs)[1]


def conv3d_grad_filter_case(draw: Draw) -> Case:
    (x, w), attrs = conv3d_case(draw)
    y = conv3d_ref(x, w, **attrs)
    return [x, _array(draw, y.shape)], attrs | {"x_shape": x.shape, "w_shape": w.shape}


def conv3d_grad_filter_ref(x: np.ndarray, dy: np.ndarray, x_shape: Any, w_shape: Any, **attrs: Any) -> np.ndarray:
    return conv_loops(x, np.zeros(w_shape), dy, **attrs)[2]


# pooling ----------------------------------------------------------------------------------------
def pool_loops(x: np.ndarray, dy: np.ndarray | None, kind: str, ksize: Any, strides: Any, padding: Any,
               data_format: str) -> tuple[np.ndarray, np.ndarray]:
    """(y, dx) in data_format: max (gradient to each window's first maximum in row-major order) or avg
    (over the window's real elements), by a loop over output positions."""
    xf = _to_first(x, data_format).astype(np.float64)
    n, c, *size = xf.shape
    rank = len(size)
    k, s = _per_axis(ksize, rank), _per_axis(strides, rank)
    pads = resolve(padding, tuple(size), k, s, (1,) * rank)
    out = [(size[i] + sum(pads[i]) - k[i]) // s[i] + 1 for i in range(rank)]
    y = np.zeros((n, c, *out))
    g_dy = np.ones_like(y) if dy is None else _to_first(dy, data_format).astype(np.float64)
    dx = np.zeros_like(xf)
    for o in itertools.product(*(range(v) for v in out)):
        ranges = []
        for i in range(rank):
            start = o[i] * s[i] - pads[i][0]
            ranges.append(slice(max(start, 0), min(start + k[i], size[i])))
        block = xf[(slice(None), slice(None), *ranges)].reshape(n, c, -1)  # real elements, row-major
        at = (slice(None), slice(None), *o)
        if block.shape[-1] == 0:
            continue
        if kind == "max":
            first = block.argmax(axis=-1)  # argmax picks the first maximum
            y[at] = block.max(axis=-1)
            part = np.zeros_like(block)
            np.put_along_axis(part, first[..., None], g_dy[at][..., None], axis=-1)
        else:
            y[at] = block.mean(axis=-1)
            part = np.repeat(g_dy[at][..., None] / block.shape[-1], block.shape[-1], axis=-1)
        dx[(slice(None), slice(None), *ranges)] += part.reshape(n, c, *(r.stop - r.start for r in ranges))
    return _from_first(y, data_format), _from_first(dx, data_format)


def pool3d_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from(["NCDHW", "NDHWC"]))
    ksize = draw(st.sampled_from([1, 2, (2, 3, 1), 3, [2]]))
    k = _per_axis(ksize)
    strides = draw(st.sampled_from([1, 2, (2, 1, 2)]))
    explicit = [((1, 0), (0, 0), (0, 1))] if min(k) >= 2 else []  # no window of padding only
    padding = draw(st.sampled_from(["VALID", "SAME", "SAME_UPPER", *explicit]))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    size = tuple(draw(st.integers(k[i], 4)) for i in range(3))
    shape = (n, c, *size) if fmt == "NCDHW" else (n, *size, c)
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": fmt}
    return [draw(fst.distinct_values(shape))], attrs


def max_pool3d_ref(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return pool_loops(x, None, "max", **attrs)[0]


def avg_pool3d_ref(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return pool_loops(x, None, "avg", **attrs)[0]


def max_pool3d_grad_case(draw: Draw) -> Case:
    (x,), attrs = pool3d_case(draw)
    y = max_pool3d_ref(x, **attrs)
    return [x, y, _array(draw, y.shape)], attrs


def max_pool3d_grad_ref(x: np.ndarray, y: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    return pool_loops(x, dy, "max", **attrs)[1]


def avg_pool3d_grad_case(draw: Draw) -> Case:
    (x,), attrs = pool3d_case(draw)
    y = avg_pool3d_ref(x, **attrs)
    return [_array(draw, y.shape)], attrs | {"x_shape": x.shape}


def avg_pool3d_grad_ref(dy: np.ndarray, x_shape: Any, **attrs: Any) -> np.ndarray:
    return pool_loops(np.zeros(x_shape), dy, "avg", **attrs)[1]


CASES = [
    OpCase("conv3d", conv3d_case, reference=conv3d_ref),
    OpCase("conv3d_grad_data", conv3d_grad_data_case, reference=conv3d_grad_data_ref, wrt=()),
    OpCase("conv3d_grad_filter", conv3d_grad_filter_case, reference=conv3d_grad_filter_ref, wrt=()),
    OpCase("max_pool3d", pool3d_case, reference=max_pool3d_ref),
    OpCase("max_pool3d_grad", max_pool3d_grad_case, reference=max_pool3d_grad_ref, wrt=()),
    OpCase("avg_pool3d", pool3d_case, reference=avg_pool3d_ref),
    OpCase("avg_pool3d_grad", avg_pool3d_grad_case, reference=avg_pool3d_grad_ref, wrt=()),
]
