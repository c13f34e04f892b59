"""The table of op cases: one ``OpCase`` per op registered by flowjob-ops (plugin ``ops``).

Each case draws small float64 inputs (gradients are checked in float64) built away from the
op's kinks and ties, plus attributes, and gives a plain-numpy reference. Gradient ops and ops
without a gradient get ``wrt=()``: they are checked forward only. test_op_table.py runs the
conformance suite of ``flowjob_core.testing`` over ``CASES``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

from flowjob_ops.kernels import window2d as pads
from flowjob_core.testing.modules import sibling

Draw = Any
Case = tuple[list[np.ndarray], dict]


loops = sibling(__file__, "reference_loops")


# helpers ------------------------------------------------------------------------
def _array(draw: Draw, shape: tuple[int, ...], low: float = -3.0, high: float = 3.0) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(low, high, allow_subnormal=False)))


def _away(draw: Draw, shape: tuple[int, ...], points: tuple[float, ...] = (0.0,), gap: float = 0.1,
          low: float = -3.0, high: float = 3.0) -> np.ndarray:
    return draw(fst.array_away_from(shape, points, gap, low, high))


def _positive(draw: Draw, shape: tuple[int, ...], low: float = 0.5, high: float = 3.0) -> np.ndarray:
    return draw(fst.positive_arrays(shape, low, high))


def _shape(draw: Draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, max_dims, max_side)))


def _axes(draw: Draw, rank: int) -> Any:
    """None, one axis (maybe negative) or a list of axes."""
    kind = draw(st.sampled_from(["none", "int", "list"]))
    if kind == "none" or rank == 0:
        return None
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    return sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))


def _np_axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# activations --------------------------------------------------------------------
def unary_case(low: float = -3.0, high: float = 3.0, away: tuple[float, ...] = (), gap: float = 0.1) -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        x = _away(draw, shape, away, gap, low, high) if away else _array(draw, shape, low, high)
        return [x], {}

    return make


def saved_and_dy_case(low: float, high: float) -> Any:
    """(saved value in [low, high], dy): inputs of the fused *_grad ops."""

    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        return [_array(draw, shape, low, high), _array(draw, shape)], {}

    return make


def relu_grad_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [np.maximum(_away(draw, shape), 0.0), _array(draw, shape)], {}


def _phi(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_ref(x: np.ndarray) -> np.ndarray:
    return x * _phi(x)


def gelu_grad_ref(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy * (_phi(x) + x * np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi))


# binary math --------------------------------------------------------------------
def binary_case(a_kind: str = "any", b_kind: str = "any") -> Any:
    def make(draw: Draw) -> Case:
        sa, sb = draw(fst.broadcastable_pair(max_dims=3, max_side=3))
        arrays = []
        for shape, kind in ((tuple(sa), a_kind), (tuple(sb), b_kind)):
            if kind == "positive":
                arrays.append(_positive(draw, shape))
            elif kind == "large":  # |a| >= 0.2 ...
                arrays.append(_away(draw, shape, (0.0,), 0.2))
            elif kind == "small":  # ... and |b| <= 0.1: a != b everywhere, no tie for max/min
                arrays.append(_array(draw, shape, -0.1, 0.1))
            else:
                arrays.append(_array(draw, shape))
        return arrays, {}

    return make


def compare_case(draw: Draw) -> Case:
    """A broadcastable pair from a small alphabet: equal elements (ties) are common."""
    sa, sb = draw(fst.broadcastable_pair(max_dims=3, max_side=3))
    values = st.sampled_from([-1.0, 0.0, 0.5, 2.0])
    return [np.asarray(draw(fst.arrays(tuple(sa), values))), np.asarray(draw(fst.arrays(tuple(sb), values)))], {}


def compare_ref(fn: Any) -> Any:
    return lambda a, b: fn(a, b).astype(np.int8)


def extremum_grad_case(draw: Draw) -> Case:
    (a, b), _ = binary_case("large", "small")(draw)
    out = np.broadcast_shapes(a.shape, b.shape)
    return [a, b, _array(draw, out)], {}


def scalar_case(scalar: Any = None, x_kind: str = "any") -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        if x_kind == "positive":
            x = _positive(draw, shape)
        elif x_kind == "nonzero":
            x = _away(draw, shape, (0.0,), 0.5)
        else:
            x = _array(draw, shape)
        value = draw(scalar if scalar is not None else st.floats(-3.0, 3.0))
        return [x], {"scalar": value}

    return make


NONZERO = fst.away_from((0.0,), 0.5, -3.0, 3.0)


def clip_case(draw: Draw) -> Case:
    lo, hi = draw(st.sampled_from([(-1.0, 1.0), (None, 0.5), (-0.5, None), (0.0, 2.0)]))
    points = tuple(b for b in (lo, hi) if b is not None)
    return [_away(draw, _shape(draw), points, 0.1)], {"min_value": lo, "max_value": hi}


def clip_ref(x: np.ndarray, min_value: Any, max_value: Any) -> np.ndarray:
    return np.clip(x, -np.inf if min_value is None else min_value, np.inf if max_value is None else max_value)


def clip_grad_case(draw: Draw) -> Case:
    (x,), attrs = clip_case(draw)
    return [x, _array(draw, x.shape)], attrs


def clip_grad_ref(x: np.ndarray, dy: np.ndarray, min_value: Any, max_value: Any) -> np.ndarray:
    inside = np.ones(x.shape, bool)
    if min_value is not None:
        inside &= x >= min_value
    if max_value is not None:
        inside &= x <= max_value
    return dy * inside


# reductions -----------------------------------------------------------------------
def reduce_case(distinct: bool = False) -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        x = draw(fst.distinct_values(shape)) if distinct else _array(draw, shape)
        return [x], {"axis": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}

    return make


def legacy_reduced(value: Any) -> np.ndarray:
    """A reduction's numpy result in legacy's shape: a reduction of every axis is (1,), never 0-d."""
    return np.reshape(value, np.shape(value) or (1,))


def reduce_ref(fn: Any) -> Any:
    return lambda x, axis, keepdims: legacy_reduced(fn(x, axis=_np_axis(axis), keepdims=keepdims))


def extremum_reduce_grad_case(draw: Draw) -> Case:
    shape = _shape(draw)
    x = draw(fst.arrays(shape, st.sampled_from([-1.0, 0.0, 0.5, 2.0])))  # small alphabet: many ties
    axis, keepdims = _axes(draw, len(shape)), draw(st.booleans())
    y = legacy_reduced(np.max(x, axis=_np_axis(axis), keepdims=keepdims))
    return [x, y, _array(draw, y.shape)], {"axis": axis, "keepdims": keepdims}


def extremum_reduce_grad_ref(x: np.ndarray, y: np.ndarray, dy: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    axes = tuple(range(x.ndim)) if axis is None else tuple(np.atleast_1d(axis) % x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    hit = x == y.reshape(kept)
    return hit * (dy.reshape(kept) / hit.sum(axis=axes, keepdims=True))


# matmul / bias_add ----------------------------------------------------------------
def matmul_case(draw: Draw) -> Case:
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    # batch axes: none, equal, broadcast against each other, or only on one side
    batch_a, batch_b = draw(st.sampled_from([((), ()), ((2,), (2,)), ((2, 1), (3,)), ((), (2,)), ((2,), ())]))
    a = _array(draw, batch_a + ((k, m) if ta else (m, k)))
    b = _array(draw, batch_b + ((n, k) if tb else (k, n)))
    return [a, b], {"transpose_a": ta, "transpose_b": tb}


def matmul_ref(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b)


def bias_add_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from([None, "NCHW", "NHWC", "NC", "NWC"]))
    rank = 4 if fmt in ("NCHW", "NHWC") else draw(st.integers(2, 3)) if fmt is None else len(fmt)
    shape = _shape(draw, rank, rank, 3)
    axis = rank - 1 if fmt is not None and fmt.endswith("C") and not fmt.startswith("NC") else 1
    return [_array(draw, shape), _array(draw, (shape[axis],))], {"data_format": fmt}


def bias_add_ref(x: np.ndarray, b: np.ndarray, data_format: Any) -> np.ndarray:
    axis = x.ndim - 1 if data_format is not None and not data_format.startswith("NC") else 1
    return x + b.reshape(tuple(-1 if i == axis else 1 for i in range(x.ndim)))


# softmax ------------------------------------------------------------------------
def softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def softmax_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape)], {"axis": draw(st.integers(-len(shape), len(shape) - 1))}


def softmax_grad_case(log: bool) -> Any:
    def make(draw: Draw) -> Case:
        (x,), attrs = softmax_case(draw)
        y = (log_softmax_ref if log else softmax_ref)(x, attrs["axis"])
        return [y, _array(draw, x.shape)], attrs

    return make


def softmax_grad_ref(y: np.ndarray, dy: np.ndarray, axis: int) -> np.ndarray:
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


def log_softmax_grad_ref(y: np.ndarray, dy: np.ndarray, axis: int) -> np.ndarray:
    return dy - np.exp(y) * dy.sum(axis=axis, keepdims=True)


# losses -------------------------------------------------------------------------
def sparse_xent_case(draw: Draw) -> Case:
    lead = _shape(draw, 1, 2, 3)
    classes = draw(st.integers(1, 5))
    labels = np.asarray(draw(fst.arrays(lead, st.integers(-classes, classes - 1), dtype=np.int32)))
    return [labels, _array(draw, lead + (classes,))], {}


def sparse_xent_ref(labels: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    log_prob = log_softmax_ref(logits, -1)
    inside = (labels >= 0) & (labels < logits.shape[-1])  # others add no loss (legacy's split classes)
    picked = np.take_along_axis(log_prob, np.where(inside, labels, 0)[..., None].astype(np.int64), -1)[..., 0]
    return np.where(inside, -picked, 0.0), np.exp(log_prob)


def sparse_xent_grad_case(draw: Draw) -> Case:
    (labels, logits), _ = sparse_xent_case(draw)
    return [labels, softmax_ref(logits, -1), _array(draw, labels.shape)], {}


def sparse_xent_grad_ref(labels: np.ndarray, prob: np.ndarray, dy: np.ndarray) -> np.ndarray:
    inside = (labels >= 0) & (labels < prob.shape[-1])
    onehot = np.eye(prob.shape[-1])[np.where(inside, labels, 0)]
    return (prob - onehot) * (dy * inside)[..., None]


def dense_xent_case(draw: Draw) -> Case:
    shape = _shape(draw, 2, 3, 4)  # rows and classes: legacy's op refused rank 1
    labels = _array(draw, shape, 0.1, 1.0)  # a distribution per row, as the op's labels are meant to be
    return [labels / labels.sum(-1, keepdims=True), _array(draw, shape)], {}


def dense_xent_ref(labels: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return -(labels * log_softmax_ref(logits, -1)).sum(-1), softmax_ref(logits, -1)


def dense_xent_grad_case(draw: Draw) -> Case:
    (labels, logits), _ = dense_xent_case(draw)
    return [labels, softmax_ref(logits, -1), _array(draw, logits.shape[:-1])], {}


def dense_xent_grad_ref(labels: np.ndarray, prob: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return (prob - labels) * dy[..., None]  # legacy's and TensorFlow's rule, whatever the labels sum to


def sigmoid_xent_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape, 0.0, 1.0), _array(draw, shape, -6.0, 6.0)], {}


def sigmoid_xent_ref(labels: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-x))
    return -labels * np.log(s) - (1.0 - labels) * np.log(1.0 - s)


def sigmoid_xent_grad_case(draw: Draw) -> Case:
    (labels, x), _ = sigmoid_xent_case(draw)
    return [labels, x, _array(draw, x.shape)], {}


def sigmoid_xent_grad_ref(labels: np.ndarray, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x)) - labels) * dy


# dropout ---------------------------------------------------------------------------
def dropout_case(rates: list[float]) -> Any:
    def make(draw: Draw) -> Case:
        shape = _shape(draw)
        noise = draw(st.sampled_from([None, tuple(1 if i == 0 else d for i, d in enumerate(shape))]))
        return [_array(draw, shape)], {"rate": draw(st.sampled_from(rates)), "noise_shape": noise, "seed": None}

    return make


def dropout_predict_ref(x: np.ndarray, rate: float, noise_shape: Any, seed: Any) -> tuple[np.ndarray, np.ndarray]:
    """The kit's forward runs are predict jobs: dropout is the identity, its mask all ones."""
    return x, np.ones(x.shape if noise_shape is None else noise_shape)


# conv / pool -------------------------------------------------------------------------
def _spatial(fmt: str, shape: tuple[int, ...]) -> tuple[int, int]:
    ah, aw = pads.SPATIAL_AXES[fmt]
    return shape[ah], shape[aw]


def conv_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from(["NCHW", "NHWC"]))
    groups = draw(st.sampled_from([1, 1, 2]))
    n, cg, fg = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    c, f = cg * groups, fg * groups
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = draw(st.sampled_from([1, 2, (1, 2)]))
    dilations = draw(st.sampled_from([None, 1, 2]))
    padding = draw(st.sampled_from(["VALID", "SAME", ((1, 0), (0, 1))]))
    d = 1 if dilations is None else dilations
    h, w = draw(st.integers((kh - 1) * d + 1, 5)), draw(st.integers((kw - 1) * d + 1, 5))
    x_shape = (n, c, h, w) if fmt == "NCHW" else (n, h, w, c)
    w_shape = (f, cg, kh, kw) if fmt == "NCHW" else (f, kh, kw, cg)
    attrs = {"strides": strides, "padding": padding, "data_format": fmt, "dilations": dilations, "groups": groups}
    return [_array(draw, x_shape, -1.0, 1.0), _array(draw, w_shape, -1.0, 1.0)], attrs


def _conv_geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict) -> tuple:
    fmt = attrs["data_format"]
    kh, kw = (w_shape[2], w_shape[3]) if fmt == "NCHW" else (w_shape[1], w_shape[2])
    strides = pads.normalize_pair(attrs["strides"], "strides")
    dilation = pads.normalize_pair(attrs["dilations"] or 1, "dilations")
    resolved, _ = pads.resolve_padding(attrs["padding"], _spatial(fmt, x_shape), (kh, kw), strides, dilation, fmt)
    return strides, resolved, dilation, attrs["groups"], fmt


def conv_ref(x: np.ndarray, w: np.ndarray, **attrs: Any) -> np.ndarray:
    return loops.conv2d_ref(x, w, *_conv_geometry(x.shape, w.shape, attrs))


def conv_grad_data_case(draw: Draw) -> Case:
    (x, w), attrs = conv_case(draw)
    y = conv_ref(x, w, **attrs)
    return [_array(draw, y.shape), w], attrs | {"x_shape": x.shape, "w_shape": w.shape}


def conv_grad_data_ref(dy: np.ndarray, w: np.ndarray, **attrs: Any) -> np.ndarray:
    x = np.zeros(attrs["x_shape"])
    return loops.conv2d_grads_ref(x, w, dy, *_conv_geometry(x.shape, w.shape, attrs))[0]


def conv_grad_filter_case(draw: Draw) -> Case:
    (x, w), attrs = conv_case(draw)
    y = conv_ref(x, w, **attrs)
    return [x, _array(draw, y.shape)], attrs | {"x_shape": x.shape, "w_shape": w.shape}


def conv_grad_filter_ref(x: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    w = np.zeros(attrs["w_shape"])
    return loops.conv2d_grads_ref(x, w, dy, *_conv_geometry(x.shape, w.shape, attrs))[1]


def conv_bias_case(draw: Draw) -> Case:
    """conv2d_bias inputs; with relu, a bias per channel that keeps x*w + b away from the kink."""
    (x, w), attrs = conv_case(draw)
    activation = draw(st.sampled_from([None, "relu"]))
    axis = 1 if attrs["data_format"] == "NCHW" else 3
    z = np.moveaxis(conv_ref(x, w, **attrs), axis, -1).reshape(-1, w.shape[0])
    if activation is None:
        bias = _array(draw, (w.shape[0],), -1.0, 1.0)
    else:  # per channel, the candidate offset farthest from every pre-activation value
        grid = np.linspace(-1.0, 1.0, 81)
        gaps = np.abs(z[:, :, None] + grid[None, None, :]).min(axis=0)
        bias = grid[gaps.argmax(axis=1)]
        if gaps.max(axis=1).min() < 0.05:
            activation = None
    return [x, w, bias], attrs | {"activation": activation}


def conv_bias_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, activation: Any, **attrs: Any) -> np.ndarray:
    shape = (1, -1, 1, 1) if attrs["data_format"] == "NCHW" else (1, 1, 1, -1)
    z = conv_ref(x, w, **attrs) + b.reshape(shape)
    return np.maximum(z, 0) if activation == "relu" else z


def conv_bias_pool_case(draw: Draw) -> Case:
    """conv2d_bias_pool inputs; a pooling whose windows have a clear maximum (else 1x1 pooling)."""
    (x, w, b), attrs = conv_bias_case(draw)
    z = conv_bias_ref(x, w, b, **(attrs | {"activation": None}))  # the pre-activation
    fmt = attrs["data_format"]
    ksize = draw(st.sampled_from([1, 2, (2, 3)]))
    strides = draw(st.sampled_from([1, 2]))
    padding = draw(st.sampled_from(["VALID", "SAME"]))
    kh, kw = pads.normalize_pair(ksize, "ksize")
    h, w_ = _spatial(fmt, z.shape)
    if padding == "VALID" and (h < kh or w_ < kw):
        padding = "SAME"
    pool = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": fmt}
    zn = np.moveaxis(z, 3, 1) if fmt == "NHWC" else z
    (pt, _), (pl, _) = _pool_geometry(z.shape, pool)[2]
    gap = np.inf
    oh, ow = _spatial(fmt, max_pool_ref(z, **pool).shape)
    sh, sw = pads.normalize_pair(strides, "strides")
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            win = zn[:, :, max(r0, 0):r0 + kh, max(c0, 0):c0 + kw].reshape(zn.shape[0], zn.shape[1], -1)
            if win.shape[-1] > 1:
                top = np.sort(win, axis=-1)
                gap = min(gap, float((top[..., -1] - top[..., -2]).min()))
    if gap < 0.05:
        pool = {"ksize": 1, "strides": 1, "padding": "VALID", "data_format": fmt}
    return [x, w, b], attrs | {"pool_ksize": pool["ksize"], "pool_strides": pool["strides"],
                               "pool_padding": pool["padding"]}


def conv_bias_pool_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, activation: Any, pool_ksize: Any,
                       pool_strides: Any, pool_padding: Any, **attrs: Any) -> np.ndarray:
    a = conv_bias_ref(x, w, b, activation, **attrs)
    return max_pool_ref(a, ksize=pool_ksize, strides=pool_strides, padding=pool_padding,
                        data_format=attrs["data_format"])


def pool_case(draw: Draw) -> Case:
    fmt = draw(st.sampled_from(["NCHW", "NHWC"]))
    ksize = draw(st.sampled_from([1, 2, (2, 3), 3]))
    kh, kw = pads.normalize_pair(ksize, "ksize")
    strides = draw(st.sampled_from([1, 2, (2, 1)]))
    padding = draw(st.sampled_from(["VALID", "SAME"]))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, w = draw(st.integers(kh, 5)), draw(st.integers(kw, 5))
    shape = (n, c, h, w) if fmt == "NCHW" else (n, h, w, c)
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": fmt}
    return [draw(fst.distinct_values(shape))], attrs


def _pool_geometry(x_shape: tuple[int, ...], attrs: dict) -> tuple:
    fmt = attrs["data_format"]
    ksize = pads.normalize_pair(attrs["ksize"], "ksize")
    strides = pads.normalize_pair(attrs["strides"], "strides")
    resolved, _ = pads.resolve_padding(attrs["padding"], _spatial(fmt, x_shape), ksize, strides, 1, fmt)
    return ksize, strides, resolved, fmt


def max_pool_ref(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return loops.max_pool_ref(x, *_pool_geometry(x.shape, attrs))


def avg_pool_ref(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return loops.avg_pool_ref(x, *_pool_geometry(x.shape, attrs))


def max_pool_grad_case(draw: Draw) -> Case:
    (x,), attrs = pool_case(draw)
    y = max_pool_ref(x, **attrs)
    return [x, y, _array(draw, y.shape)], attrs


def max_pool_grad_ref(x: np.ndarray, y: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    return loops.max_pool_grad_ref(x, dy, *_pool_geometry(x.shape, attrs))


def max_pool_relu_grad_case(draw: Draw) -> Case:
    (x,), attrs = pool_case(draw)
    x = x - np.median(x)  # about half of the elements are negative (and some windows' maxima)
    y = max_pool_ref(x, **attrs)
    return [x, y, _array(draw, y.shape)], attrs


def max_pool_relu_grad_ref(x: np.ndarray, y: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    return max_pool_grad_ref(x, y, dy, **attrs) * (x > 0)


def avg_pool_grad_case(draw: Draw) -> Case:
    (x,), attrs = pool_case(draw)
    y = avg_pool_ref(x, **attrs)
    return [_array(draw, y.shape)], attrs | {"x_shape": x.shape}


def avg_pool_grad_ref(dy: np.ndarray, **attrs: Any) -> np.ndarray:
    return loops.avg_pool_grad_ref(attrs["x_shape"], dy, *_pool_geometry(attrs["x_shape"], attrs))


# fused by flowjob_ops.passes.fuse_dense: matmul -> bias_add (-> relu), elementwise chains ----------
def matmul_bias_case(draw: Draw) -> Case:
    """matmul_bias inputs; with relu, a bias per channel that keeps op(a) @ op(b) + bias away from the kink."""
    (a, b), attrs = matmul_case(draw)
    z = matmul_ref(a, b, **attrs)
    fmt = draw(st.sampled_from([None, "N" + "W" * (z.ndim - 2) + "C"]))
    axis = 1 if fmt is None else z.ndim - 1
    activation = draw(st.sampled_from([None, "relu"]))
    channels = np.moveaxis(z, axis, -1).reshape(-1, z.shape[axis])
    if activation is None:
        bias = _array(draw, (z.shape[axis],))
    else:  # per channel, the candidate offset farthest from every product value
        grid = np.linspace(-3.0, 3.0, 121)
        gaps = np.abs(channels[:, :, None] + grid[None, None, :]).min(axis=0)
        bias = grid[gaps.argmax(axis=1)]
        if gaps.max(axis=1).min() < 0.05:
            activation = None
    return [a, b, bias], attrs | {"data_format": fmt, "activation": activation}


def matmul_bias_ref(a: np.ndarray, b: np.ndarray, bias: np.ndarray, transpose_a: bool, transpose_b: bool,
                    data_format: Any, activation: Any) -> np.ndarray:
    z = bias_add_ref(matmul_ref(a, b, transpose_a, transpose_b), bias, data_format)
    return np.maximum(z, 0) if activation == "relu" else z


# each step: (op, attrs, args), -1 = the running value; every chain stays where its ops are smooth
# for the inputs chain_case draws: x (the chain's shape), y (broadcasts into it, |y| <= 1 or positive)
CHAINS = {
    "mul_bcast_tanh": ([("multiply", {}, (0, 1)), ("scalar_add", {"scalar": 0.5}, (-1,)), ("tanh", {}, (-1,)),
                        ("scalar_mul", {"scalar": 2.0}, (-1,))], "any"),
    "exp_rsub_square": ([("scalar_mul", {"scalar": 0.5}, (0,)), ("exp", {}, (-1,)), ("subtract", {}, (1, -1)),
                         ("square", {}, (-1,))], "any"),
    "divided_by_running": ([("square", {}, (0,)), ("scalar_add", {"scalar": 1.0}, (-1,)), ("divide", {}, (1, -1)),
                            ("negative", {}, (-1,)), ("scalar_rsub", {"scalar": 1.5}, (-1,))], "any"),
    "log_sqrt": ([("square", {}, (0,)), ("scalar_add", {"scalar": 0.5}, (-1,)), ("sqrt", {}, (-1,)),
                  ("log", {}, (-1,)), ("scalar_div", {"scalar": 2.0}, (-1,)), ("add", {}, (-1, 1))], "any"),
    "reciprocal_rdiv_pow": ([("square", {}, (0,)), ("scalar_add", {"scalar": 1.0}, (-1,)), ("reciprocal", {}, (-1,)),
                             ("scalar_rdiv", {"scalar": 3.0}, (-1,)), ("scalar_pow", {"scalar": 1.5}, (-1,)),
                             ("divide", {}, (-1, 1))], "positive"),
    "input_thrice": ([("exp", {}, (0,)), ("multiply", {}, (-1, 0)), ("maximum", {}, (1, -1)),
                      ("minimum", {}, (-1, 0))], "below"),
    "relu_kink_free": ([("add", {}, (0, 1)), ("relu", {}, (-1,)), ("scalar_mul", {"scalar": -1.0}, (-1,)),
                        ("abs", {}, (-1,)), ("sign", {}, (-1,))], "small"),
}
NP_STEPS = {
    "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "negative": np.negative, "square": np.square,
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "abs": np.abs, "reciprocal": np.reciprocal, "sign": np.sign,
    "scalar_add": lambda x, scalar: x + scalar, "scalar_rsub": lambda x, scalar: scalar - x,
    "scalar_div": lambda x, scalar: x / scalar, "scalar_rdiv": lambda x, scalar: scalar / x,
    "scalar_pow": lambda x, scalar: x ** scalar, "scalar_mul": lambda x, scalar: x * scalar,
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum,
}


def chain_case(draw: Draw) -> Case:
    steps, y_kind = CHAINS[draw(st.sampled_from(sorted(CHAINS)))]
    shape = _shape(draw)
    y_shape = tuple(draw(st.sampled_from([1, d])) for d in shape)[draw(st.integers(0, len(shape) - 1)):]
    if y_kind == "small":  # x + y stays at least 0.05 away from relu's kink and abs's
        x, y = _away(draw, shape), _array(draw, y_shape, -0.05, 0.05)
    elif y_kind == "below":  # no ties: x e^x >= -0.37 > y, and x e^x - x = x (e^x - 1) >= 0.01
        x, y = _away(draw, shape, low=-1.5, high=1.5), _array(draw, y_shape, -3.0, -1.0)
    else:
        x = _array(draw, shape, -1.5, 1.5)
        y = _positive(draw, y_shape) if y_kind == "positive" else _array(draw, y_shape, -1.0, 1.0)
    return [x, y], {"steps": tuple((op, dict(a), args) for op, a, args in steps)}


def chain_ref(*inputs: np.ndarray, steps: Any) -> np.ndarray:
    value = None
    for op, attrs, args in steps:
        value = NP_STEPS[op](*(value if i == -1 else inputs[i] for i in args), **attrs)
    return value


# shape and layout -------------------------------------------------------------------
def reshape_case(draw: Draw) -> Case:
    shape = _shape(draw)
    size = int(np.prod(shape))
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = draw(st.sampled_from(divisors))
    target = draw(st.sampled_from([(first, size // first), (first, -1), (-1,), (size, 1, 1)]))
    return [_array(draw, shape)], {"shape": target}


def transpose_case(draw: Draw) -> Case:
    shape = _shape(draw, 1, 4, 3)
    perm = draw(st.one_of(st.none(), st.permutations(range(len(shape))).map(tuple)))
    return [_array(draw, shape)], {"perm": perm}


def concat_case(draw: Draw) -> Case:
    shape = _shape(draw)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    count = draw(st.integers(1, 3))
    xs = []
    for _ in range(count):
        own = list(shape)
        own[axis] = draw(st.integers(1, 3))
        xs.append(_array(draw, tuple(own)))
    return xs, {"axis": axis}


def split_case(draw: Draw) -> Case:
    shape = _shape(draw)
    axis = draw(st.integers(0, len(shape) - 1))
    cuts = sorted(draw(st.sets(st.integers(1, shape[axis] - 1), max_size=2))) if shape[axis] > 1 else []
    edges = [0, *cuts, shape[axis]]
    return [_array(draw, shape)], {"axis": axis, "sizes": tuple(b - a for a, b in zip(edges, edges[1:]))}


def split_ref(x: np.ndarray, axis: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def cast_case(targets: list[Any]) -> Any:
    def make(draw: Draw) -> Case:
        return [_array(draw, _shape(draw))], {"dtype": np.dtype(draw(st.sampled_from(targets)))}

    return make


def compatible_case(draw: Draw) -> Case:
    shape = _shape(draw, 1, 3, 4)
    x_shape = tuple(draw(st.sampled_from([d, 1])) for d in shape)
    count = draw(st.integers(1, 2))
    like = [_array(draw, tuple(draw(st.sampled_from([d, 1])) for d in shape[k:])) for k in range(count)]
    return [_array(draw, x_shape), *like], {}


def fused_cast_scale_case(draw: Draw) -> Case:
    x = _array(draw, _shape(draw)).astype(draw(st.sampled_from([np.float32, np.int32])))
    scale_dtype = draw(st.sampled_from([np.float32, np.float64]))
    scale_by_tensor = np.array([draw(st.floats(-4, 4, width=32))], dtype=scale_dtype)
    return [x, scale_by_tensor], {"scale": draw(st.sampled_from([1.0, 0.125, -3.0]))}


def fused_cast_scale_ref(x: np.ndarray, scale_by_tensor: np.ndarray, scale: float) -> np.ndarray:
    dtype = scale_by_tensor.dtype
    return x.astype(dtype) * (scale_by_tensor[0] * dtype.type(scale)).astype(dtype)


# indexing ---------------------------------------------------------------------------
def slice_case(draw: Draw) -> Case:
    shape = _shape(draw)
    begin, size = [], []
    for dim in shape:
        b = draw(st.integers(0, dim - 1))
        begin.append(draw(st.sampled_from([b, b - dim] if b else [0, None])))  # b - dim: from the end
        size.append(draw(st.sampled_from([draw(st.integers(1, dim - b)), -1, None])))
    return [_array(draw, shape)], {"begin": tuple(begin), "size": tuple(size)}


def _box(shape: tuple[int, ...], begin: Any, size: Any) -> tuple[slice, ...]:
    out = []
    for dim, b, s in zip(shape, begin, size):
        b = (b or 0) % dim
        out.append(slice(b, dim if s in (None, -1) else b + s))
    return tuple(out)


def slice_grad_case(draw: Draw) -> Case:
    (x,), attrs = slice_case(draw)
    part = x[_box(x.shape, attrs["begin"], attrs["size"])]
    return [_array(draw, part.shape)], attrs | {"shape": x.shape}


def slice_grad_ref(dy: np.ndarray, begin: Any, size: Any, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape)
    out[_box(shape, begin, size)] = dy
    return out


def gather_case(draw: Draw) -> Case:
    shape = _shape(draw)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    dim = shape[axis]
    indices = np.asarray(draw(fst.arrays(_shape(draw, 0, 2, 3), st.integers(-dim, dim - 1), dtype=np.int64)))
    return [_array(draw, shape), indices], {"axis": axis}


def gather_grad_case(draw: Draw) -> Case:
    (params, indices), attrs = gather_case(draw)
    out = np.take(params, indices, axis=attrs["axis"])
    return [indices, _array(draw, out.shape)], attrs | {"shape": params.shape}


def gather_grad_ref(indices: np.ndarray, dy: np.ndarray, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape)
    np.add.at(out, (slice(None),) * (axis % len(shape)) + (indices,), dy)
    return out


def where_case(draw: Draw) -> Case:
    sc, sx = draw(fst.broadcastable_pair(max_dims=3, max_side=3))
    cond = np.asarray(draw(fst.arrays(tuple(sc), st.booleans(), dtype=np.bool_)))
    if draw(st.booleans()):
        cond = cond.astype(np.int32)
    return [cond, _array(draw, tuple(sx)), _array(draw, tuple(sx))], {}


def where_grad_case(draw: Draw) -> Case:
    (cond, x, _), _ = where_case(draw)
    out = np.broadcast_shapes(cond.shape, x.shape)
    return [cond, _array(draw, out)], {}


def where_grad_ref(cond: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = np.broadcast_to(cond != 0, dy.shape)
    return dy * c, dy * ~c


def argmax_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [draw(fst.distinct_values(shape))], {"axis": draw(st.integers(-len(shape), len(shape) - 1))}


def one_hot_case(draw: Draw) -> Case:
    shape = _shape(draw, 0, 2, 3)
    depth = draw(st.integers(1, 4))
    indices = np.asarray(draw(fst.arrays(shape, st.integers(0, depth - 1), dtype=np.int32)))
    attrs = {"depth": depth, "on_value": draw(st.sampled_from([1, 5])), "off_value": draw(st.sampled_from([0, -1])),
             "axis": draw(st.integers(-1, len(shape))), "dtype": draw(st.sampled_from([None, np.dtype(np.int32)]))}
    return [indices], attrs


def one_hot_ref(indices: np.ndarray, depth: int, on_value: Any, off_value: Any, axis: int, dtype: Any) -> np.ndarray:
    eye = np.where(np.eye(depth, dtype=bool), on_value, off_value)[indices]  # class axis last
    return np.moveaxis(eye, -1, axis).astype(dtype or np.float32)


# constants and random numbers ------------------------------------------------------
def constant_case(draw: Draw) -> Case:
    shape = _shape(draw, 0, 3, 3)
    value = draw(st.sampled_from([2.5, -1, [1.0, 2.0, 3.0]]))
    if isinstance(value, list):
        shape = shape[:-1] + (3,) if shape else (3,)
    return [], {"value": value, "shape": shape, "dtype": draw(st.sampled_from([None, np.dtype(np.float64)]))}


def constant_ref(value: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype or np.float32), shape)


def like_case(value: bool) -> Any:
    def make(draw: Draw) -> Case:
        attrs = {"value": draw(st.sampled_from([0, 1.5, -2])), "dtype": None} if value else {}
        return [_array(draw, _shape(draw))], attrs

    return make


def random_case(kind: str) -> Any:
    def make(draw: Draw) -> Case:
        attrs = {"shape": _shape(draw, 0, 3, 4), "dtype": draw(st.sampled_from([None, np.dtype(np.float64)])),
                 "seed": draw(st.integers(0, 1000))}
        if kind == "uniform":
            attrs |= {"minval": -2.0, "maxval": 3.0}
        else:
            attrs |= {"mean": 1.0, "stddev": 0.5}
        return [], attrs

    return make


def random_ref(kind: str) -> Any:
    """The same stream the kernel draws from: the numpy backend seeds ``default_rng(seed)``."""

    def ref(shape: tuple[int, ...], dtype: Any, seed: int, **bounds: float) -> np.ndarray:
        dt = np.dtype(dtype or np.float32)
        rng = np.random.default_rng(seed)
        if kind == "uniform":
            u = rng.random(shape, dtype=dt)
            return u * dt.type(bounds["maxval"] - bounds["minval"]) + dt.type(bounds["minval"])
        return rng.standard_normal(shape, dtype=dt) * dt.type(bounds["stddev"]) + dt.type(bounds["mean"])

    return ref


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


CASES = [
    # activations
    OpCase("relu", unary_case(away=(0.0,)), reference=lambda x: np.maximum(x, 0)),
    OpCase("relu_grad", relu_grad_case, reference=lambda y, dy: dy * (y > 0), wrt=()),
    OpCase("sigmoid", unary_case(-6.0, 6.0), reference=_sigmoid),
    OpCase("sigmoid_grad", saved_and_dy_case(0.0, 1.0), reference=lambda y, dy: dy * y * (1 - y), wrt=()),
    OpCase("tanh", unary_case(), reference=np.tanh),
    OpCase("tanh_grad", saved_and_dy_case(-1.0, 1.0), reference=lambda y, dy: dy * (1 - y * y), wrt=()),
    OpCase("gelu", unary_case(-5.0, 5.0), reference=gelu_ref),
    OpCase("gelu_grad", saved_and_dy_case(-5.0, 5.0), reference=gelu_grad_ref, wrt=()),
    # elementwise math
    OpCase("add", binary_case(), reference=np.add),
    OpCase("subtract", binary_case(), reference=np.subtract),
    OpCase("multiply", binary_case(), reference=np.multiply),
    OpCase("divide", binary_case("any", "positive"), reference=np.divide),
    OpCase("maximum", binary_case("large", "small"), reference=np.maximum),
    OpCase("minimum", binary_case("large", "small"), reference=np.minimum),
    OpCase("maximum_grad", extremum_grad_case, reference=lambda a, b, dy: (dy * (a >= b), dy * (a < b)), wrt=()),
    OpCase("minimum_grad", extremum_grad_case, reference=lambda a, b, dy: (dy * (a <= b), dy * (a > b)), wrt=()),
    OpCase("scalar_add", scalar_case(), reference=lambda x, scalar: x + scalar),
    OpCase("scalar_rsub", scalar_case(), reference=lambda x, scalar: scalar - x),
    OpCase("scalar_div", scalar_case(NONZERO), reference=lambda x, scalar: x / scalar),
    OpCase("scalar_rdiv", scalar_case(x_kind="nonzero"), reference=lambda x, scalar: scalar / x),
    OpCase("scalar_pow", scalar_case(st.sampled_from([-1.5, 0, 0.5, 1, 2, 3]), "positive"),
           reference=lambda x, scalar: x ** scalar),
    OpCase("negative", unary_case(), reference=np.negative),
    OpCase("square", unary_case(), reference=np.square),
    OpCase("sqrt", lambda draw: ([_positive(draw, _shape(draw))], {}), reference=np.sqrt),
    OpCase("exp", unary_case(), reference=np.exp),
    OpCase("log", lambda draw: ([_positive(draw, _shape(draw), 0.2)], {}), reference=np.log),
    OpCase("abs", unary_case(away=(0.0,)), reference=np.abs),
    OpCase("reciprocal", unary_case(away=(0.0,), gap=0.5), reference=np.reciprocal),
    OpCase("sign", unary_case(away=(0.0,)), reference=np.sign),
    OpCase("greater", compare_case, reference=compare_ref(np.greater), wrt=()),
    OpCase("greater_equal", compare_case, reference=compare_ref(np.greater_equal), wrt=()),
    OpCase("less", compare_case, reference=compare_ref(np.less), wrt=()),
    OpCase("less_equal", compare_case, reference=compare_ref(np.less_equal), wrt=()),
    OpCase("equal", compare_case, reference=compare_ref(np.equal), wrt=()),
    OpCase("not_equal", compare_case, reference=compare_ref(np.not_equal), wrt=()),
    OpCase("clip_by_value", clip_case, reference=clip_ref),
    OpCase("clip_grad", clip_grad_case, reference=clip_grad_ref, wrt=()),
    # reductions
    OpCase("reduce_sum", reduce_case(), reference=reduce_ref(np.sum)),
    OpCase("reduce_mean", reduce_case(), reference=reduce_ref(np.mean)),
    OpCase("reduce_max", reduce_case(distinct=True), reference=reduce_ref(np.max)),
    OpCase("reduce_min", reduce_case(distinct=True), reference=reduce_ref(np.min)),
    OpCase("reduce_extremum_grad", extremum_reduce_grad_case, reference=extremum_reduce_grad_ref, wrt=()),
    # matmul, bias_add
    OpCase("matmul", matmul_case, reference=matmul_ref),
    OpCase("bias_add", bias_add_case, reference=bias_add_ref),
    # softmax
    OpCase("softmax", softmax_case, reference=softmax_ref),
    OpCase("softmax_grad", softmax_grad_case(False), reference=softmax_grad_ref, wrt=()),
    OpCase("log_softmax", softmax_case, reference=log_softmax_ref),
    OpCase("log_softmax_grad", softmax_grad_case(True), reference=log_softmax_grad_ref, wrt=()),
    # losses
    OpCase("sparse_softmax_cross_entropy", sparse_xent_case, reference=sparse_xent_ref, wrt=(1,)),
    OpCase("sparse_softmax_cross_entropy_grad", sparse_xent_grad_case, reference=sparse_xent_grad_ref, wrt=()),
    OpCase("softmax_cross_entropy", dense_xent_case, reference=dense_xent_ref),
    OpCase("softmax_cross_entropy_grad", dense_xent_grad_case, reference=dense_xent_grad_ref, wrt=()),
    OpCase("sigmoid_cross_entropy", sigmoid_xent_case, reference=sigmoid_xent_ref),
    OpCase("sigmoid_cross_entropy_grad", sigmoid_xent_grad_case, reference=sigmoid_xent_grad_ref, wrt=()),
    # dropout: the gradient job is a train job, whose mask changes at every evaluation, so only rate 0
    # is checked by finite differences; test_dropout.py checks dx = dy * mask with real masks
    OpCase("dropout", dropout_case([0.0]), reference=dropout_predict_ref, name="dropout_rate0"),
    OpCase("dropout", dropout_case([0.3, 0.5, 0.9]), reference=dropout_predict_ref, wrt=(), name="dropout_predict"),
    # convolution and pooling
    OpCase("conv2d", conv_case, reference=conv_ref),
    OpCase("conv2d_grad_data", conv_grad_data_case, reference=conv_grad_data_ref, wrt=()),
    OpCase("conv2d_grad_filter", conv_grad_filter_case, reference=conv_grad_filter_ref, wrt=()),
    OpCase("max_pool2d", pool_case, reference=max_pool_ref),
    OpCase("max_pool2d_grad", max_pool_grad_case, reference=max_pool_grad_ref, wrt=()),
    # fused by flowjob_ops.passes.fuse_conv: conv2d -> bias_add (-> relu), max_pool2d_grad -> relu_grad
    OpCase("conv2d_bias", conv_bias_case, reference=conv_bias_ref),
    OpCase("conv2d_bias_pool", conv_bias_pool_case, reference=conv_bias_pool_ref),
    OpCase("max_pool2d_relu_grad", max_pool_relu_grad_case, reference=max_pool_relu_grad_ref, wrt=()),
    # fused by flowjob_ops.passes.fuse_dense: matmul -> bias_add (-> relu), runs of elementwise ops
    OpCase("matmul_bias", matmul_bias_case, reference=matmul_bias_ref),
    OpCase("elementwise_chain", chain_case, reference=chain_ref),
    OpCase("avg_pool2d", pool_case, reference=avg_pool_ref),
    OpCase("avg_pool2d_grad", avg_pool_grad_case, reference=avg_pool_grad_ref, wrt=()),
    # shape and layout
    OpCase("reshape", reshape_case, reference=lambda x, shape: x.reshape(shape)),
    OpCase("identity", unary_case(), reference=lambda x: x),
    OpCase("transpose", transpose_case, reference=lambda x, perm: np.transpose(x, perm)),
    OpCase("concat", concat_case, reference=lambda *xs, axis: np.concatenate(xs, axis=axis)),
    OpCase("split", split_case, reference=split_ref),
    OpCase("cast", cast_case([np.float32, np.float64]), reference=lambda x, dtype: x.astype(dtype)),
    OpCase("cast", cast_case([np.int32, np.int64, np.float16]), reference=lambda x, dtype: x.astype(dtype), wrt=(),
           name="cast_narrowing"),
    OpCase("fused_cast_scale", fused_cast_scale_case, reference=fused_cast_scale_ref, wrt=()),
    OpCase("broadcast_to_compatible_with", compatible_case, reference=lambda x, *like: np.broadcast_to(
        x, np.broadcast_shapes(x.shape, *(b.shape for b in like))), wrt=(0,)),
    # indexing
    OpCase("slice", slice_case, reference=lambda x, begin, size: x[_box(x.shape, begin, size)]),
    OpCase("slice_grad", slice_grad_case, reference=slice_grad_ref, wrt=()),
    OpCase("gather", gather_case, reference=lambda p, i, axis: np.take(p, i, axis=axis), wrt=(0,)),
    OpCase("gather_grad", gather_grad_case, reference=gather_grad_ref, wrt=()),
    OpCase("where", where_case, reference=lambda c, x, y: np.where(c != 0, x, y), wrt=(1, 2)),
    OpCase("where_grad", where_grad_case, reference=where_grad_ref, wrt=()),
    OpCase("argmax", argmax_case, reference=lambda x, axis: np.atleast_1d(np.argmax(x, axis=axis).astype(np.int32)),
           wrt=()),
    OpCase("one_hot", one_hot_case, reference=one_hot_ref, wrt=()),
    # constants and random numbers
    OpCase("constant", constant_case, reference=constant_ref, wrt=()),
    OpCase("zeros_like", like_case(False), reference=np.zeros_like),
    OpCase("constant_like", like_case(True), reference=lambda x, value, dtype: np.full(x.shape, value, x.dtype)),
    OpCase("random_uniform", random_case("uniform"), reference=random_ref("uniform"), wrt=()),
    OpCase("random_normal", random_case("normal"), reference=random_ref("normal"), wrt=()),
]
CASES += sibling(__file__, "cases_activations").CASES
CASES += sibling(__file__, "cases_arithmetic").CASES
CASES += sibling(__file__, "cases_math_binary").CASES
CASES += sibling(__file__, "cases_math_unary").CASES
CASES += sibling(__file__, "cases_reduce").CASES
CASES += sibling(__file__, "cases_cross_entropy").CASES
CASES += sibling(__file__, "cases_losses").CASES
CASES += sibling(__file__, "cases_norm").CASES
CASES += sibling(__file__, "cases_dropout").CASES
CASES += sibling(__file__, "cases_random").CASES
CASES += sibling(__file__, "cases_shape").CASES
CASES += sibling(__file__, "cases_padding").CASES
CASES += sibling(__file__, "cases_indexing").CASES
CASES += sibling(__file__, "cases_constants").CASES
CASES += sibling(__file__, "cases_assign").CASES
CASES += sibling(__file__, "cases_sorting").CASES
CASES += sibling(__file__, "cases_deconv").CASES
CASES += sibling(__file__, "cases_conv3d").CASES
CASES += sibling(__file__, "cases_upsample").CASES
CASES += sibling(__file__, "cases_matmul").CASES
CASES += sibling(__file__, "cases_categorical").CASES
CASES += sibling(__file__, "cases_labels").CASES
CASES += sibling(__file__, "cases_data_dependent").CASES
CASES += sibling(__file__, "cases_repeat").CASES
CASES += sibling(__file__, "cases_pack").CASES
CASES += sibling(__file__, "cases_decode_random").CASES
CASES += sibling(__file__, "cases_models").CASES
CASES += sibling(__file__, "cases_batch_norm_train").CASES
CASES += sibling(__file__, "cases_tensor_buffer").CASES
CASES += sibling(__file__, "cases_quantization").CASES
CASES += sibling(__file__, "cases_sums_splits").CASES
CASES += sibling(__file__, "cases_op_test_fixtures").CASES
