"""Legacy OneFlow v0.3/v0.4 reads padding="SAME" of nn.conv2d, layers.conv2d, max_pool2d and
avg_pool2d as "SAME_LOWER": an odd total padding puts its extra pixel before (top / left).
"SAME_UPPER" (TensorFlow's reading) stays available by name.

Every path is checked where the two readings differ (odd totals: even kernels, or stride 2 on
an even input) against numpy references that pad explicitly with the test's own rule: the
im2col strategies and Winograd kernels, the reference and blocked (tiled) pooling kernels, the
fused conv2d_bias_pool, and train jobs (values and gradients) in both data formats."""
from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.api.model_io import load_variables
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import activations, initializers, layers, math, reduce
from flowjob_ops.api import conv as conv_api
from flowjob_ops.api import pool as pool_api
from flowjob_ops.overrides.cpu import conv as cpu_conv
from flowjob_ops.overrides.cpu import pool_cache_blocked as cpu_pool
from flowjob_ops.kernels import window2d, winograd
from flowjob_ops.kernels.conv2d_bias_pool import Conv2dBiasPool
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter
from flowjob_ops.overrides.cpu import pool_plane_layout as pool

probe = sibling(__file__, "grad_probe")
Pads = tuple[tuple[int, int], tuple[int, int]]


def legacy_same(size: int, k: int, s: int, d: int = 1, *, lower: bool = True) -> tuple[int, int]:
    """(before, after) of legacy's same padding: output ceil(size / s); an odd total's extra pixel
    before for same_lower, after for same_upper."""
    out = (size + s - 1) // s
    needed = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    big, small = needed - needed // 2, needed // 2
    return (big, small) if lower else (small, big)


def _pads(hw: tuple[int, int], k: tuple[int, int], s: tuple[int, int], d: tuple[int, int] = (1, 1),
          lower: bool = True) -> Pads:
    return (legacy_same(hw[0], k[0], s[0], d[0], lower=lower), legacy_same(hw[1], k[1], s[1], d[1], lower=lower))


# numpy references (NCHW, float64) -------------------------------------------------------------
def conv_ref(x: np.ndarray, w: np.ndarray, s: tuple[int, int], pads: Pads, d: tuple[int, int],
             dy: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(y, dx, dw) of a convolution of the explicitly padded x; the gradients for output gradient dy."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), *pads))
    f, _, kh, kw = w.shape
    oh = (xp.shape[2] - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (xp.shape[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    y = np.zeros((x.shape[0], f, oh, ow))
    dxp, dw = np.zeros_like(xp), np.zeros(w.shape)
    for i, j in itertools.product(range(kh), range(kw)):
        rows = slice(i * d[0], i * d[0] + (oh - 1) * s[0] + 1, s[0])
        cols = slice(j * d[1], j * d[1] + (ow - 1) * s[1] + 1, s[1])
        y += np.einsum("nchw,fc->nfhw", xp[:, :, rows, cols], w[:, :, i, j])
        if dy is not None:
            dxp[:, :, rows, cols] += np.einsum("nfhw,fc->nchw", dy, w[:, :, i, j])
            dw[:, :, i, j] = np.einsum("nfhw,nchw->fc", dy, xp[:, :, rows, cols])
    if dy is None:
        return y, None, None
    (t, _), (l, _) = pads
    return y, dxp[:, :, t:t + x.shape[2], l:l + x.shape[3]], dw


def pool_ref(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], pads: Pads, kind: str,
             dy: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(y, dx): max sends a window's gradient to its first maximum, avg divides by the real cells."""
    n, c, h, w = x.shape
    oh = (h + sum(pads[0]) - k[0]) // s[0] + 1
    ow = (w + sum(pads[1]) - k[1]) // s[1] + 1
    y, dx = np.zeros((n, c, oh, ow)), np.zeros(x.shape)
    dy = np.ones_like(y) if dy is None else dy
    for b, ch, r, q in itertools.product(range(n), range(c), range(oh), range(ow)):
        top, left = r * s[0] - pads[0][0], q * s[1] - pads[1][0]
        cells = [(a, e) for a in range(top, top + k[0]) for e in range(left, left + k[1]) if 0 <= a < h and 0 <= e < w]
        values = [x[b, ch, a, e] for a, e in cells]
        if kind == "max":
            y[b, ch, r, q] = max(values)
            a, e = cells[values.index(max(values))]
            dx[b, ch, a, e] += dy[b, ch, r, q]
        else:
            y[b, ch, r, q] = sum(values) / len(values)
            for a, e in cells:
                dx[b, ch, a, e] += dy[b, ch, r, q] / len(values)
    return y, dx


def _nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _nchw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def _close(got: Any, want: np.ndarray, tol: float = 1e-10) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol)


# the padding rule ------------------------------------------------------------------------------
@pytest.mark.parametrize("size, k, s, d", list(itertools.product((5, 6, 7, 8), (1, 2, 3, 4, 5), (1, 2, 3), (1, 2))))
def test_same_is_legacy_same_lower_and_same_upper_stays_tensorflows(size: int, k: int, s: int, d: int) -> None:
    lower, upper = legacy_same(size, k, s, d), legacy_same(size, k, s, d, lower=False)
    out = (size + s - 1) // s
    assert window2d.resolve_padding("SAME", (size, size), k, s, d) == ((lower, lower), (out, out))
    assert window2d.resolve_padding("same_lower", (size, 7), k, s, d)[0][0] == lower
    assert window2d.resolve_padding("SAME_UPPER", (7, size), k, s, d)[0][1] == upper


def test_the_readings_differ_exactly_for_odd_totals() -> None:
    # ResNet's stride-2 3x3 on an even input, and an even kernel at stride 1: one extra pixel before
    assert window2d.resolve_padding("SAME", (8, 8), 3, 2)[0] == ((1, 0), (1, 0))
    assert window2d.resolve_padding("SAME", (8, 9), 4, 1)[0] == ((2, 1), (2, 1))
    # LeNet's 5x5 at stride 1 (even total) is symmetric in both readings
    assert window2d.resolve_padding("SAME", (28, 28), 5, 1) == window2d.resolve_padding("SAME_UPPER", (28, 28), 5, 1)


# kernels ---------------------------------------------------------------------------------------
# (x (N, C, H, W), F, k, stride, dilation): every one has an odd total padding along some axis
CONV_GEOMETRIES = [
    ((2, 3, 8, 8), 4, (3, 3), (2, 2), (1, 1)),  # stride 2 on even input: (1, 0)
    ((2, 3, 7, 6), 5, (4, 2), (1, 1), (1, 1)),  # even kernels: (2, 1) and (1, 0)
    ((1, 2, 9, 8), 3, (2, 3), (2, 3), (1, 2)),  # mixed, dilated width
]


def _conv_arrays(x_shape: tuple[int, ...], f: int, k: tuple[int, int], seed: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((f, x_shape[1], *k))
    return x, w


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("strategy", ["rows", "cols"])
@pytest.mark.parametrize("x_shape, f, k, s, d", CONV_GEOMETRIES)
def test_im2col_kernels_pad_before(x_shape: tuple, f: int, k: tuple, s: tuple, d: tuple, strategy: str,
                                   fmt: str) -> None:
    x, w = _conv_arrays(x_shape, f, k)
    pads = _pads(x_shape[2:], k, s, d)
    y_ref, _, _ = conv_ref(x, w, s, pads, d)
    dy = np.random.default_rng(4).standard_normal(y_ref.shape)
    y_ref, dx_ref, dw_ref = conv_ref(x, w, s, pads, d, dy)
    xa, wa, dya = (x, w, dy) if fmt == "NCHW" else (_nhwc(x), _nhwc(w), _nhwc(dy))
    geom = ConvGeometry.create(xa.shape, wa.shape, s, "SAME", d, 1, fmt)
    y = Conv2dForward(np, geom, np.float64, strategy=strategy)(xa, wa)
    dx = Conv2dBackwardData(np, geom, np.float64, strategy=strategy)(dya, wa)
    dw = Conv2dBackwardFilter(np, geom, np.float64, strategy=strategy)(xa, dya)
    back = (lambda a: a) if fmt == "NCHW" else _nchw
    _close(back(y), y_ref)
    _close(back(dx), dx_ref)
    _close(back(dw), dw_ref)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("x_shape, r", [((2, 3, 9, 11), 4), ((1, 2, 10, 7), 4), ((2, 2, 6, 8), 3)])
def test_winograd_kernels_pad_before(x_shape: tuple, r: int, fmt: str) -> None:
    x, w = _conv_arrays(x_shape, 4, (r, r))
    pads = _pads(x_shape[2:], (r, r), (1, 1))
    dy = np.random.default_rng(5).standard_normal((x_shape[0], 4, *x_shape[2:]))
    y_ref, dx_ref, dw_ref = conv_ref(x, w, (1, 1), pads, (1, 1), dy)
    xa, wa, dya = (x, w, dy) if fmt == "NCHW" else (_nhwc(x), _nhwc(w), _nhwc(dy))
    geom = ConvGeometry.create(xa.shape, wa.shape, 1, "SAME", 1, 1, fmt)
    assert winograd.applicable(geom) and geom.window.pads == pads
    back = (lambda a: a) if fmt == "NCHW" else _nchw
    _close(back(winograd.WinogradForward(np, geom, np.float64)(xa, wa)), y_ref, 1e-9)
    _close(back(winograd.WinogradBackwardData(np, geom, np.float64)(dya, wa)), dx_ref, 1e-9)
    _close(back(winograd.WinogradBackwardFilter(np, geom, np.float64)(xa, dya)), dw_ref, 1e-9)


# (x (N, C, H, W), k, stride): odd totals; 2x2/2 on odd sizes also makes the windows tile the padded plane
POOL_GEOMETRIES = [
    ((2, 3, 7, 9), (2, 2), (2, 2)),
    ((2, 2, 8, 8), (3, 3), (2, 2)),
    ((1, 3, 6, 7), (2, 3), (1, 2)),
]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("x_shape, k, s", POOL_GEOMETRIES)
def test_pool_kernels_pad_before(x_shape: tuple, k: tuple, s: tuple, fmt: str) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal(x_shape)
    pads = _pads(x_shape[2:], k, s)
    y_max, _ = pool_ref(x, k, s, pads, "max")
    dy = rng.standard_normal(y_max.shape)
    y_max, dx_max = pool_ref(x, k, s, pads, "max", dy)
    y_avg, dx_avg = pool_ref(x, k, s, pads, "avg", dy)
    xa, dya = (x, dy) if fmt == "NCHW" else (_nhwc(x), _nhwc(dy))
    back = (lambda a: a) if fmt == "NCHW" else _nchw
    args = (np, xa.shape, np.float64, k, s, "SAME", fmt)
    for fwd_cls, bwd_cls in ((pool.MaxPool2d, pool.MaxPool2dBackward),
                             (cpu_pool.TiledMaxPool2d, cpu_pool.TiledMaxPool2dBackward)):
        y = np.array(fwd_cls(*args)(xa), copy=True)
        _close(back(y), y_max)
        _close(back(bwd_cls(*args)(xa, y, dya)), dx_max)
    _close(back(pool.AvgPool2d(*args)(xa)), y_avg)
    _close(back(pool.AvgPool2dBackward(*args)(dya)), dx_avg)


def test_the_blocked_pooling_tiles_a_same_padded_plane() -> None:
    # 2x2/2 on 7x9: pads (1, 0) and (1, 0) make an 8x10 plane the windows tile, so the blocked
    # kernel's tiled path (not its fallback) runs with the padding before
    x = np.random.default_rng(9).standard_normal((2, 3, 7, 9))
    kernel = cpu_pool.TiledMaxPool2d(np, x.shape, np.float64, 2, 2, "SAME", "NCHW")
    assert kernel.window.pads == ((1, 0), (1, 0)) and kernel.window.tiles
    y = kernel(x)
    assert kernel._layouts, "the blocked kernel fell back to the reference path"
    _close(y, pool_ref(x, (2, 2), (2, 2), ((1, 0), (1, 0)), "max")[0])


@pytest.mark.parametrize("algorithm", ["im2col", "winograd"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_fused_conv_bias_pool_pads_both_before(algorithm: str, fmt: str) -> None:
    # conv 4x4 stride 1 on 9x8 (pads (2, 1) and (2, 1)), then 3x3/2 pooling of the 9x8 result ((1, 1), (1, 0))
    x, w = _conv_arrays((2, 3, 9, 8), 4, (4, 4))
    b = np.random.default_rng(8).standard_normal(4)
    z, _, _ = conv_ref(x, w, (1, 1), _pads((9, 8), (4, 4), (1, 1)), (1, 1))
    pooled, _ = pool_ref(z, (3, 3), (2, 2), _pads((9, 8), (3, 3), (2, 2)), "max")
    want = np.maximum(pooled + b[:, None, None], 0)
    xa, wa = (x, w) if fmt == "NCHW" else (_nhwc(x), _nhwc(w))
    fused = Conv2dBiasPool(np, ConvGeometry.create(xa.shape, wa.shape, 1, "SAME", 1, 1, fmt),
                           np.float64, pool=(3, 2, "SAME"), relu=True, algorithm=algorithm)
    _close(fused(xa, wa, b) if fmt == "NCHW" else _nchw(fused(xa, wa, b)), want, 1e-9)


# train jobs ------------------------------------------------------------------------------------
@pytest.fixture
def session() -> Any:
    s = probe.session_with_probe()
    probe.RESULTS.clear()
    yield s
    s.close()


def _with_placeholders(func: Callable[..., Any], shapes: list[tuple[int, ...]]) -> Callable[..., Any]:
    """func with a signature of float32 placeholders of ``shapes`` returning tp.Numpy (this module's
    annotations are strings, so a job body cannot name the test's local shapes)."""
    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(s)) for i, s in enumerate(shapes)]
    func.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore[attr-defined]
    return func


def _train(session: Any, shapes: list[tuple[int, ...]], body: Callable[..., Any]) -> Any:
    """A train job over float32 placeholders of ``shapes`` and a last one, dy, shaped like the output:
    the loss is sum(y * dy), so the probed gradients of the others are the products with dy."""
    def job(*blobs: Any) -> Any:
        *inputs, dy = blobs
        y = body(*inputs)
        fc.add_loss(reduce.reduce_sum(math.multiply(y, dy)))
        for i, blob in enumerate(inputs):
            probe.probe(blob, f"d{i}")
        return y

    return probe.job(session)(_with_placeholders(job, shapes))


def _f32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("algorithm", ["im2col", "winograd"])
@pytest.mark.parametrize("x_shape, f, k, s", [((2, 3, 8, 8), 4, (3, 3), (2, 2)), ((2, 3, 7, 6), 4, (4, 4), (1, 1))])
def test_nn_conv2d_same_job(session: Any, monkeypatch: pytest.MonkeyPatch, x_shape: tuple, f: int, k: tuple,
                            s: tuple, algorithm: str, fmt: str) -> None:
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", algorithm)  # Winograd where it applies (stride 1)
    x, w = (_f32(a) for a in _conv_arrays(x_shape, f, k))
    pads = _pads(x_shape[2:], k, s)
    y_ref, _, _ = conv_ref(x, w, s, pads, (1, 1))
    dy = _f32(np.random.default_rng(10).standard_normal(y_ref.shape))
    y_ref, dx_ref, dw_ref = conv_ref(x, w, s, pads, (1, 1), dy.astype(np.float64))
    to, back = (lambda a: a, lambda a: a) if fmt == "NCHW" else (_nhwc, _nchw)
    xa, wa, dya = to(x), to(w), to(dy)
    train = _train(session, [xa.shape, wa.shape, dya.shape], lambda a, b: conv_api.conv2d(a, b, list(s), "SAME", fmt))
    geom = ConvGeometry.create(xa.shape, wa.shape, s, "SAME", 1, 1, fmt)
    assert cpu_conv.algorithm(geom) == ("winograd" if algorithm == "winograd" and s == (1, 1) else "im2col")
    _close(back(train(xa, wa, dya)), y_ref, 1e-4)
    _close(back(probe.RESULTS["d0"]), dx_ref, 1e-4)
    _close(back(probe.RESULTS["d1"]), dw_ref, 1e-4)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("x_shape, k, s", POOL_GEOMETRIES)
def test_nn_pool_same_job(session: Any, x_shape: tuple, k: tuple, s: tuple, kind: str, fmt: str) -> None:
    x = _f32(np.random.default_rng(11).standard_normal(x_shape))
    pads = _pads(x_shape[2:], k, s)
    y_ref, _ = pool_ref(x, k, s, pads, kind)
    dy = _f32(np.random.default_rng(12).standard_normal(y_ref.shape))
    y_ref, dx_ref = pool_ref(x, k, s, pads, kind, dy)
    to, back = (lambda a: a, lambda a: a) if fmt == "NCHW" else (_nhwc, _nchw)
    op = pool_api.max_pool2d if kind == "max" else pool_api.avg_pool2d
    train = _train(session, [to(x).shape, to(dy).shape], lambda a: op(a, list(k), list(s), "SAME", fmt))
    _close(back(train(to(x), to(dy))), y_ref, 1e-5)
    _close(back(probe.RESULTS["d0"]), dx_ref, 1e-5)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("algorithm", ["im2col", "winograd"])
def test_layers_conv2d_relu_pool_jobs(monkeypatch: pytest.MonkeyPatch, algorithm: str, fmt: str) -> None:
    """layers.conv2d "SAME" (4x4 kernel) + relu + max_pool2d "SAME" (3x3/2 on an even size): the predict
    job fuses them into conv2d_bias_pool, the train job into conv2d_bias + pooling; both give the
    explicitly padded numpy values, and the train job its gradients."""
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", algorithm)
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    x, w = (_f32(a) for a in _conv_arrays((2, 3, 9, 8), 4, (4, 4)))
    b = _f32(np.random.default_rng(13).standard_normal(4))
    conv_pads, pool_pads = _pads((9, 8), (4, 4), (1, 1)), _pads((9, 8), (3, 3), (2, 2))
    assert conv_pads == ((2, 1), (2, 1)) and pool_pads == ((1, 1), (1, 0))
    z = conv_ref(x, w, (1, 1), conv_pads, (1, 1))[0] + b[:, None, None]
    pooled, _ = pool_ref(np.maximum(z, 0), (3, 3), (2, 2), pool_pads, "max")
    dy = _f32(np.random.default_rng(14).standard_normal(pooled.shape))
    _, da = pool_ref(np.maximum(z, 0), (3, 3), (2, 2), pool_pads, "max", dy.astype(np.float64))
    _, dx_ref, dw_ref = conv_ref(x, w, (1, 1), conv_pads, (1, 1), da * (z > 0))
    to, back = (lambda a: a, lambda a: a) if fmt == "NCHW" else (_nhwc, _nchw)
    w_layer = to(w)

    def block(a: Any) -> Any:
        zero = initializers.constant_initializer(0.0)
        act = layers.conv2d(a, 4, 4, padding="SAME", data_format=fmt, activation=activations.relu, name="c",
                            kernel_initializer=zero, bias_initializer=zero)
        return pool_api.max_pool2d(act, 3, 2, "SAME", data_format=fmt)

    def train_body(a: Any) -> Any:
        probe.probe(fc.get_variable("c-weight", shape=w_layer.shape), "dw")
        return block(a)

    session = probe.session_with_probe()
    probe.RESULTS.clear()
    try:
        train = _train(session, [to(x).shape, to(dy).shape], train_body)

        predict = probe.job(session, "predict")(_with_placeholders(block, [to(x).shape]))

        load_variables({"c-weight": w_layer, "c-bias": b}, session=session)
        fused = np.array(predict(to(x)), copy=True)
        assert "conv2d_bias_pool" in [n.op for n in predict.plan().order]
        got = train(to(x), to(dy))
    finally:
        session.close()
    _close(back(fused), pooled, 1e-4)
    _close(back(got), pooled, 1e-4)
    _close(back(probe.RESULTS["d0"]), dx_ref, 1e-4)
    _close(back(probe.RESULTS["dw"]), dw_ref, 1e-4)
