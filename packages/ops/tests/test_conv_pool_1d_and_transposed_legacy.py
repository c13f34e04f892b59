"""Legacy v0.4 conv1d, max/avg_pool1d, conv2d_transpose, compat_conv2d and layers.conv1d through real
global functions: legacy docstring shapes, numpy loop references for values and gradients (train
jobs read the gradients with the probe), padding readings, names and argument errors."""
from __future__ import annotations

import itertools
import inspect
from typing import Any, Callable

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import activations, conv, initializers, layers, pool, reduce

run_job = sibling(__file__, "jobs").run_job
probe = sibling(__file__, "grad_probe")
deconv_ref = sibling(__file__, "cases_deconv").deconv_ref
RNG = np.random.default_rng(7)


def _normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


# numpy references (NCW) -----------------------------------------------------------------------
def conv1d_ref(x: np.ndarray, w: np.ndarray, s: int, pads: tuple[int, int], d: int, groups: int,
               dy: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, dx, dw) with dy the output gradient (ones when None), by loops over output elements."""
    n, c, width = x.shape
    f, cg, k = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads))
    out_w = (width + sum(pads) - (k - 1) * d - 1) // s + 1
    y = np.zeros((n, f, out_w))
    dy = np.ones_like(y) if dy is None else dy
    dxp, dw = np.zeros_like(xp), np.zeros(w.shape)
    for b, fo, o in itertools.product(range(n), range(f), range(out_w)):
        g = fo // (f // groups)
        for ci, t in itertools.product(range(cg), range(k)):
            pos = o * s + t * d
            y[b, fo, o] += xp[b, g * cg + ci, pos] * w[fo, ci, t]
            dxp[b, g * cg + ci, pos] += dy[b, fo, o] * w[fo, ci, t]
            dw[fo, ci, t] += dy[b, fo, o] * xp[b, g * cg + ci, pos]
    return y, dxp[:, :, pads[0]:pads[0] + width], dw


def pool1d_ref(x: np.ndarray, k: int, s: int, pads: tuple[int, int], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(y, dx for a loss sum(y)); max windows send their gradient to the first maximum, avg divides
    by the window's real elements."""
    n, c, width = x.shape
    out_w = (width + sum(pads) - k) // s + 1
    y, dx = np.zeros((n, c, out_w)), np.zeros(x.shape)
    for b, ch, o in itertools.product(range(n), range(c), range(out_w)):
        cells = [p for p in range(o * s - pads[0], o * s - pads[0] + k) if 0 <= p < width]
        values = [x[b, ch, p] for p in cells]
        if kind == "max":
            y[b, ch, o] = max(values)
            dx[b, ch, cells[values.index(max(values))]] += 1
        else:
            y[b, ch, o] = sum(values) / len(values)
            for p in cells:
                dx[b, ch, p] += 1 / len(values)
    return y, dx


def _train(session: Any, shapes: list[tuple[int, ...]], body: Callable[..., Any]) -> Any:
    """A train job over float32 placeholders of ``shapes``; body returns the output, its loss is sum(y)."""
    def job(*blobs: Any) -> Any:
        y = body(*blobs)
        fc.add_loss(reduce.reduce_sum(y))
        for i, blob in enumerate(blobs):
            probe.probe(blob, f"d{i}")
        return y

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(s)) for i, s in enumerate(shapes)]
    job.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore[attr-defined]
    return probe.job(session)(job)


@pytest.fixture
def session() -> Any:
    s = probe.session_with_probe()
    probe.RESULTS.clear()
    yield s
    s.close()


# conv1d ---------------------------------------------------------------------------------------
def test_conv1d_legacy_docstring_shape() -> None:
    x, w = _normal(1, 64, 32), _normal(32, 64, 3)
    assert run_job(lambda a, b: conv.conv1d(a, b, 1, "SAME"), x, w).shape == (1, 32, 32)


@pytest.mark.parametrize("strides, padding, pads, dilations, groups", [
    (1, "VALID", (0, 0), None, 1),
    (2, "SAME", (1, 0), 1, 1),          # legacy conv "SAME" is SAME_LOWER: the odd pixel before
    ([1], "SAME_UPPER", (0, 1), [1], 1),
    (1, "SAME", (1, 1), 2, 2),
    (2, [[0, 0], [0, 0], [2, 1]], (2, 1), None, 2),
])
def test_conv1d_values_and_gradients_ncw(session: Any, strides: Any, padding: Any, pads: tuple[int, int],
                                         dilations: Any, groups: int) -> None:
    x, w = _normal(2, 4, 7), _normal(4, 4 // groups, 2)
    train = _train(session, [x.shape, w.shape],
                   lambda a, b: conv.conv1d(a, b, strides, padding, dilations=dilations, groups=groups))
    s = strides if isinstance(strides, int) else strides[0]
    d = 1 if dilations is None else dilations if isinstance(dilations, int) else dilations[0]
    y, dx, dw = conv1d_ref(x, w, s, pads, d, groups)
    np.testing.assert_allclose(train(x, w), y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probe.RESULTS["d0"], dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probe.RESULTS["d1"], dw, rtol=1e-5, atol=1e-5)


def test_conv1d_nwc_matches_ncw(session: Any) -> None:
    x, w = _normal(2, 3, 5), _normal(4, 3, 3)  # NCW x: 3 channels, 5 wide; weight (F, C, k)
    x_nwc, w_nwc = x.transpose(0, 2, 1).copy(), w.transpose(0, 2, 1).copy()
    train = _train(session, [x_nwc.shape, w_nwc.shape], lambda a, b: conv.conv1d(a, b, 1, "SAME", "NWC"))
    y, dx, dw = conv1d_ref(x, w, 1, (1, 1), 1, 1)
    np.testing.assert_allclose(train(x_nwc, w_nwc), y.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probe.RESULTS["d0"], dx.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probe.RESULTS["d1"], dw.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_conv1d_names_and_errors() -> None:
    x, w = _normal(1, 2, 5), _normal(3, 2, 2)

    def body(a: Any, b: Any) -> Any:
        y = conv.conv1d(a, b, 1, "VALID", name="c1")
        assert y.lbn == "c1_reshape_out/out_0" and y.shape == (1, 3, 4)
        return y

    run_job(body, x, w)
    for kwargs, match in [({"data_format": "NCHW"}, "data_format must be 'NCW' or 'NWC'"),
                          ({"strides": [1, 1]}, "strides must be a positive int or a list of one"),
                          ({"padding": "FULL"}, "padding must be 'SAME'"),
                          ({"padding": [[0, 0], [1, 1], [0, 0]]}, "only the W dimension may be padded"),
                          ({"dilations": 0}, "dilations must be a positive int")]:
        args = {"strides": 1, "padding": "VALID"} | kwargs
        with pytest.raises(fc.OpBuildError, match=r"flow\.nn\.conv1d.*" + match):
            run_job(lambda a, b: conv.conv1d(a, b, **args), x, w)  # noqa: B023 - traced at once
    with pytest.raises(fc.OpBuildError, match="filters must be 3-d"):
        run_job(lambda a, b: conv.conv1d(a, b, 1, "VALID"), x, _normal(3, 2, 1, 2))


# pool1d ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("ksize, strides, padding, pads", [
    (2, 2, "VALID", (0, 0)),
    ([3], 2, "SAME", (1, 1)),
    (2, 1, "SAME", (1, 0)),          # legacy pooling "SAME" is SAME_LOWER too
    (2, 1, "SAME_UPPER", (0, 1)),
    ([1, 1, 3], [1, 1, 1], [[0, 0], [0, 0], [1, 1]], (1, 1)),
])
def test_pool1d_values_and_gradients_ncw(session: Any, kind: str, ksize: Any, strides: Any, padding: Any,
                                         pads: tuple[int, int]) -> None:
    x = RNG.permutation(2 * 3 * 7).reshape(2, 3, 7).astype(np.float32)  # distinct: no ties for max
    fn = pool.max_pool1d if kind == "max" else pool.avg_pool1d
    train = _train(session, [x.shape], lambda a: fn(a, ksize, strides, padding, data_format="NCW"))
    k = ksize if isinstance(ksize, int) else ksize[-1]
    s = strides if isinstance(strides, int) else strides[-1]
    y, dx = pool1d_ref(x, k, s, pads, kind)
    np.testing.assert_allclose(train(x), y, rtol=1e-6)
    np.testing.assert_allclose(probe.RESULTS["d0"], dx, rtol=1e-6)


def test_pool1d_legacy_default_formats() -> None:
    x = _normal(2, 6, 4)  # NWC for max_pool1d's default, NCW for avg_pool1d's
    got = run_job(lambda a: pool.max_pool1d(a, 2, 2, "VALID"), x)
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 4).max(axis=2))
    got = run_job(lambda a: pool.avg_pool1d(a, 2, 2, "VALID"), x)
    np.testing.assert_allclose(got, x.reshape(2, 6, 2, 2).mean(axis=3), rtol=1e-6)
    with pytest.raises(fc.OpBuildError, match=r"flow\.nn\.max_pool1d.*batch and channel entries must be 1"):
        run_job(lambda a: pool.max_pool1d(a, [2, 2, 1], 1, "VALID"), x)
    with pytest.raises(fc.OpBuildError, match=r"flow\.nn\.avg_pool1d.*input must be 3-d"):
        run_job(lambda a: pool.avg_pool1d(a, 2, 1, "VALID"), _normal(2, 3, 4, 4))


# conv2d_transpose -----------------------------------------------------------------------------
def test_conv2d_transpose_legacy_docstring_shape() -> None:
    x, w = _normal(1, 32, 32, 32), _normal(32, 32, 3, 3)
    got = run_job(lambda a, b: conv.conv2d_transpose(value=a, filter=b, output_shape=(1, 32, 64, 64), strides=2,
                                                   padding="SAME"), x, w)
    assert got.shape == (1, 32, 64, 64)
    np.testing.assert_allclose(got[:, :, :4, :4], deconv_ref(x, w, 2, "SAME_UPPER", "NCHW", None, 1,
                                                            (1, 32, 64, 64))[:, :, :4, :4], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt, strides, padding, in_hw, out_hw, dilations", [
    ("NCHW", 2, "VALID", (3, 2), (7, 5), None),     # 1 row and 1 column beyond the windows: zeros
    ("NCHW", 2, "SAME", (3, 3), (5, 6), None),      # odd padding: legacy crops the smaller half before
    ("NHWC", (1, 2), "same", (4, 2), (4, 4), None),
    ("NCHW", 1, "VALID", (2, 2), (4, 4), 2),
])
def test_conv2d_transpose_values_and_gradients(session: Any, fmt: str, strides: Any, padding: str,
                                               in_hw: tuple[int, int], out_hw: tuple[int, int],
                                               dilations: Any) -> None:
    n, f, c = 2, 3, 2
    x_shape = (n, f, *in_hw) if fmt == "NCHW" else (n, *in_hw, f)
    w_shape = (f, c, 2, 2) if fmt == "NCHW" else (f, 2, 2, c)
    out_shape = (n, c, *out_hw) if fmt == "NCHW" else (n, *out_hw, c)
    x, w = _normal(*x_shape), _normal(*w_shape)
    train = _train(session, [x.shape, w.shape],
                   lambda a, b: conv.conv2d_transpose(a, b, out_shape, strides, padding, fmt, dilations=dilations))
    mode = "VALID" if padding.upper() == "VALID" else "SAME_UPPER"
    want = deconv_ref(x, w, strides, mode, fmt, dilations, 1, out_shape)
    np.testing.assert_allclose(train(x, w), want, rtol=1e-5, atol=1e-5)
    if padding == "VALID" and strides == 2:
        assert not want[:, :, -1, :].any() and not want[:, :, :, -1].any()
    # the loss is sum(out) and out is linear in x and in w: each gradient entry is the sum of the
    # reference output at a unit input
    dx = np.zeros(x.shape)
    for idx in itertools.product(*(range(v) for v in x.shape)):
        dx[idx] = deconv_ref(_unit(x.shape, idx), w, strides, mode, fmt, dilations, 1, out_shape).sum()
    np.testing.assert_allclose(probe.RESULTS["d0"], dx, rtol=1e-5, atol=1e-5)
    dw = np.zeros(w.shape)
    for idx in itertools.product(*(range(v) for v in w.shape)):
        dw[idx] = deconv_ref(x, _unit(w.shape, idx), strides, mode, fmt, dilations, 1, out_shape).sum()
    np.testing.assert_allclose(probe.RESULTS["d1"], dw, rtol=1e-5, atol=1e-5)


def _unit(shape: tuple[int, ...], index: tuple[int, ...]) -> np.ndarray:
    e = np.zeros(shape)
    e[index] = 1.0
    return e


def test_conv2d_transpose_aliases_and_errors() -> None:
    x, w = _normal(1, 2, 3, 3), _normal(2, 4, 2, 2)
    got = run_job(lambda a, b: conv.conv2d_transpose(input=a, filters=b, output_shape=[1, 4, 4, 4], strides=1,
                                                   name="up"), x, w)
    np.testing.assert_allclose(got, deconv_ref(x, w, 1, "VALID", "NCHW", None, 1, (1, 4, 4, 4)), rtol=1e-5,
                               atol=1e-5)
    cases = [({"value": None, "input": None}, "exactly one of value and input"),
             ({"output_shape": (2, 4, 4, 4)}, "batch must be value's"),
             ({"output_shape": (1, 4, 9, 9)}, "deconv2d: output shape"),
             ({"padding": "SAME_LOWER"}, "padding must be 'SAME' or 'VALID'"),
             ({"strides": None}, "strides must be an int or a list")]
    for kwargs, match in cases:
        def body(a: Any, b: Any, kwargs: dict = kwargs) -> Any:
            args = {"value": a, "filter": b, "output_shape": (1, 4, 4, 4), "strides": 1} | kwargs
            return conv.conv2d_transpose(**args)

        with pytest.raises(fc.OpBuildError, match=match):
            run_job(body, x, w)


# compat_conv2d --------------------------------------------------------------------------------
def test_compat_conv2d_reads_same_as_same_upper() -> None:
    x, w = _normal(1, 2, 4, 4), _normal(3, 2, 2, 2)
    got = run_job(lambda a, b: conv.compat_conv2d(a, b, 1, "same"), x, w)
    want = run_job(lambda a, b: conv.conv2d(a, b, 1, ((0, 1), (0, 1))), x, w)
    np.testing.assert_array_equal(got, want)
    assert run_job(lambda a, b: conv.compat_conv2d(a, b, 2, "SAME"), _normal(1, 2, 32, 32), w).shape == (1, 3, 16, 16)


# layers.conv1d (and conv2d's legacy dilation_rate=None) ----------------------------------------
def test_layers_conv1d_legacy_shape_names_and_values() -> None:
    x = _normal(1, 64, 32)

    def body(a: Any) -> Any:
        y = layers.conv1d(a, 128, kernel_size=3, padding="SAME", name="Conv1d", activation=activations.relu)
        assert y.lbn == "Conv1d-activation/out_0"
        return y

    assert run_job(body, x).shape == (1, 128, 32)

    def same(a: Any) -> Any:
        return layers.conv1d(a, 4, 2, padding="VALID", data_format="NWC", name="l1", use_bias=False,
                             kernel_initializer=initializers.constant_initializer(0.5))

    xn = _normal(2, 5, 3)
    want = conv1d_ref(xn.transpose(0, 2, 1), np.full((4, 3, 2), 0.5), 1, (0, 0), 1, 1)[0].transpose(0, 2, 1)
    np.testing.assert_allclose(run_job(same, xn), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(fc.OpBuildError, match=r"flow\.layers\.conv1d.*kernel_size must be"):
        run_job(lambda a: layers.conv1d(a, 2, kernel_size=(2, 2)), x)


def test_layers_conv2d_takes_legacy_dilation_rate_none() -> None:
    y = run_job(lambda a: layers.conv2d(a, 2, 3, padding="SAME", dilation_rate=None), _normal(1, 3, 5, 5))
    assert y.shape == (1, 2, 5, 5)


# torch_conv2d_transpose ------------------------------------------------------------------------
def _torch_ref(x: np.ndarray, w: np.ndarray, s: int, needed: tuple[int, int], extra: tuple[int, int]) -> np.ndarray:
    """The full VALID transposed convolution (with the extra rows as zeros), cropped needed/2 each side."""
    n, _, h, wd = x.shape
    kh, kw = w.shape[2:]
    full_h, full_w = (h - 1) * s + kh + extra[0], (wd - 1) * s + kw + extra[1]
    full = deconv_ref(x, w, s, "VALID", "NCHW", None, 1, (n, w.shape[1], full_h, full_w))
    top, left = needed[0] // 2, needed[1] // 2
    return full[:, :, top:full_h - top, left:full_w - left]


def test_torch_conv2d_transpose_values_and_gradients(session: Any) -> None:
    x, w = _normal(2, 3, 3, 4), _normal(3, 2, 3, 3)
    body = lambda a, b: conv.torch_conv2d_transpose(a, b, output_padding=(1, 0), strides=2,  # noqa: E731
                                                  padding_needed=(2, 2))
    train = _train(session, [x.shape, w.shape], body)
    want = _torch_ref(x, w, 2, (2, 2), (1, 0))
    assert want.shape == (2, 2, 6, 7)  # torch: (3-1)*2 - 2 + 3 + 1 = 6, (4-1)*2 - 2 + 3 = 7
    np.testing.assert_allclose(train(x, w), want, rtol=1e-5, atol=1e-5)
    assert want[:, :, -1].any()  # the output_padding row still takes the windows that reach it
    dx = np.zeros(x.shape)
    for idx in itertools.product(*(range(v) for v in x.shape)):
        dx[idx] = _torch_ref(_unit(x.shape, idx), w, 2, (2, 2), (1, 0)).sum()
    np.testing.assert_allclose(probe.RESULTS["d0"], dx, rtol=1e-5, atol=1e-5)
    with pytest.raises(fc.OpBuildError, match="padding_needed must be even"):
        run_job(lambda a, b: conv.torch_conv2d_transpose(a, b, strides=1, padding_needed=(1, 0)), x, w)
    with pytest.raises(fc.OpBuildError, match="output_padding"):
        run_job(lambda a, b: conv.torch_conv2d_transpose(a, b, 2, 2, (0, 0)), x, w)
