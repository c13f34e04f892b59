"""Legacy v0.4 flow.nn.conv3d, max_pool3d, avg_pool3d and flow.layers.conv3d through real global functions:
values and gradients against numpy loop references (train jobs: dx by watch_diff, weights after one
SGD step), both data formats, "SAME" as SAME_LOWER on odd totals, groups, dilations, explicit pads,
ceil_mode, names and argument errors."""
from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd
# the loop references of the op cases (packages/ops/tests/cases_conv3d.py), loaded by path
_cases = sibling(str(pathlib.Path(__file__).resolve().parents[1] / "packages/ops/tests/_"), "cases_conv3d")
conv3d_loops, pool3d_loops = _cases.conv_loops, _cases.pool_loops

RNG = np.random.default_rng(3)
LR = 0.1


def _normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def _first(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NCDHW" else a.transpose(0, 4, 1, 2, 3)


def _last(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NCDHW" else a.transpose(0, 2, 3, 4, 1)


# flow.nn.conv3d -------------------------------------------------------------------------------
def test_conv3d_docstring_shape_and_default_name():
    seen = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 4, 10, 16, 16))) -> tp.Numpy:
        w = flow.get_variable("Convlayer-weight", shape=(8, 4, 3, 3, 3), initializer=flow.truncated_normal(0.1))
        y = flow.nn.conv3d(x, w, 1, "SAME")
        seen["name"] = y.op_name
        return y

    assert job(_normal(1, 4, 10, 16, 16)).shape == (1, 8, 10, 16, 16)
    assert seen["name"].startswith("Conv3d_")


# (spatial size, kernel, strides, padding, dilations, groups): even kernels and stride 2 on even sizes
# give odd "SAME" totals, whose extra element legacy puts before
CONV_CONFIGS = {
    "same-odd-totals": ((4, 6, 5), (2, 3, 2), [2, 2, 1], "SAME", None, 1),
    "same-upper": ((4, 5, 4), (2, 2, 3), 2, "SAME_UPPER", None, 1),
    "groups-dilation": ((5, 6, 5), (2, 2, 2), [1, 2, 1], "VALID", [2, 1, 2], 2),
    "explicit": ((3, 4, 4), (3, 1, 2), 1, [[0, 0], [0, 0], [1, 0], [0, 2], [1, 1]], 1, 1),
}


@pytest.mark.parametrize("fmt", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("config", list(CONV_CONFIGS))
def test_conv3d_train_step_against_loops(fmt, config):
    size, k, strides, padding, dilations, groups = CONV_CONFIGS[config]
    n, c, f = 2, 4, 6
    x = _last(_normal(n, c, *size), fmt)
    w0 = _normal(f, c // groups, *k)
    w0 = w0 if fmt == "NCDHW" else w0.transpose(0, 2, 3, 4, 1)
    # the op attribute: explicit pads are read in NCDHW order by nn.conv3d (legacy), as 3 spatial pairs here
    attr_pad = padding if isinstance(padding, str) else [tuple(p) for p in padding[2:]]
    mode = "SAME_LOWER" if padding == "SAME" else attr_pad
    y_ref, _, _ = conv3d_loops(x, w0, None, strides, mode, fmt, dilations, groups)
    t = RNG.normal(size=y_ref.shape).astype(np.float32)
    _, dx_ref, dw_ref = conv3d_loops(x, w0, t, strides, mode, fmt, dilations, groups)
    got = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(x.shape), t: tp.Numpy.Placeholder(t.shape)) -> tp.Numpy:
        v = flow.get_variable("v", shape=x.shape, initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        w = flow.get_variable("w", shape=w0.shape, initializer=flow.zeros_initializer())
        y = flow.nn.conv3d(xv, w, strides, padding, fmt, dilations, groups, name="c3")
        sgd(flow.math.reduce_sum(y * t))
        return y

    flow.load_variables({"w": w0})
    y = job(x, t)
    flow.sync_default_session()
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["dx"], dx_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value("w"), w0 - LR * dw_ref, rtol=1e-4, atol=1e-4)


def test_conv3d_same_puts_the_odd_element_before():
    # kernel 2 on a size of 3: one pad in total, before (SAME_LOWER); SAME_UPPER puts it after
    x = np.arange(3, dtype=np.float32).reshape(1, 1, 3, 1, 1)
    w = np.array([1.0, 10.0], np.float32).reshape(1, 1, 2, 1, 1)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 1, 3, 1, 1)), w: tp.Numpy.Placeholder((1, 1, 2, 1, 1))) -> tp.Numpy:
        return flow.concat([flow.nn.conv3d(x, w, 1, "SAME"), flow.nn.conv3d(x, w, 1, "SAME_UPPER")], axis=1)

    y = job(x, w).reshape(2, 3)
    np.testing.assert_array_equal(y[0], [0 + 10 * 0, 0 + 10 * 1, 1 + 10 * 2])
    np.testing.assert_array_equal(y[1], [0 + 10 * 1, 1 + 10 * 2, 2 + 10 * 0])


def test_conv3d_ndhwc_reads_explicit_pads_in_ncdhw_order():
    # legacy transposed NDHWC to NCDHW before reading the pads, so the C entry of NDHWC order is the D pad
    x = _normal(1, 3, 3, 3, 2)
    w = _normal(2, 2, 2, 2, 2)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 3, 3, 3, 2)), w: tp.Numpy.Placeholder((2, 2, 2, 2, 2))) -> tp.Numpy:
        return flow.nn.conv3d(x, w, 1, [[0, 0], [0, 0], [1, 1], [0, 0], [0, 0]], "NDHWC")

    y_ref = conv3d_loops(x, w, None, 1, [(1, 1), (0, 0), (0, 0)], "NDHWC", None, 1)[0]
    np.testing.assert_allclose(job(x, w), y_ref, rtol=1e-5, atol=1e-5)


# flow.nn.max_pool3d / avg_pool3d --------------------------------------------------------------
POOL_CONFIGS = {
    "same-odd-totals": ((4, 5, 6), [2, 2, 3], 2, "SAME"),
    "valid-per-axis": ((5, 4, 4), [1, 1, 3, 2, 2], [1, 1, 1, 2, 1], "VALID"),  # NCDHW 5-entry forms
    "explicit": ((3, 4, 5), 2, [2, 1, 2], [[0, 0], [0, 0], [1, 0], [0, 1], [1, 1]]),
}


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("fmt", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("config", list(POOL_CONFIGS))
def test_pool3d_train_step_against_loops(kind, fmt, config):
    size, ksize, strides, padding = POOL_CONFIGS[config]
    if fmt == "NDHWC":  # per-axis and explicit entries follow data_format
        perm = [0, 2, 3, 4, 1]
        ksize = [ksize[i] for i in perm] if isinstance(ksize, list) and len(ksize) == 5 else ksize
        strides = [strides[i] for i in perm] if isinstance(strides, list) and len(strides) == 5 else strides
        padding = padding if isinstance(padding, str) else [padding[i] for i in perm]
    n, c = 2, 3
    # distinct values: a clear maximum in every window
    x = _last((RNG.permutation(n * c * int(np.prod(size))).reshape(n, c, *size) / 7.0).astype(np.float32), fmt)
    spatial = (1, 2, 3) if fmt == "NDHWC" else (2, 3, 4)
    k = [ksize[i] for i in spatial] if isinstance(ksize, list) and len(ksize) == 5 else ksize
    s = [strides[i] for i in spatial] if isinstance(strides, list) and len(strides) == 5 else strides
    mode = "SAME_LOWER" if padding == "SAME" else padding if isinstance(padding, str) else \
        [tuple(padding[i]) for i in spatial]
    y_ref, _ = pool3d_loops(x, None, kind, k, s, mode, fmt)
    t = RNG.normal(size=y_ref.shape).astype(np.float32)
    _, dx_ref = pool3d_loops(x, t, kind, k, s, mode, fmt)
    pool = flow.nn.max_pool3d if kind == "max" else flow.nn.avg_pool3d
    got = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(x.shape), t: tp.Numpy.Placeholder(t.shape)) -> tp.Numpy:
        v = flow.get_variable("v", shape=x.shape, initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = pool(xv, ksize, strides, padding, fmt)
        sgd(flow.math.reduce_sum(y * t))
        return y

    y = job(x, t)
    flow.sync_default_session()
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["dx"], dx_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value("v"), -LR * dx_ref, rtol=1e-5, atol=1e-6)


def test_pool3d_docstring_shapes_defaults_and_names():
    names = []

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 2, 10, 12, 12))) -> tuple[tp.Numpy, tp.Numpy]:
        a = flow.nn.max_pool3d(input=x, ksize=3, strides=2, padding="SAME")  # NCDHW by default
        b = flow.nn.avg_pool3d(x, 3, 2, "SAME", "NCDHW")
        names.extend([a.op_name, b.op_name])
        return a, b

    a, b = job(_normal(1, 2, 10, 12, 12))
    assert a.shape == b.shape == (1, 2, 5, 6, 6)
    assert names[0].startswith("MaxPool3D_") and names[1].startswith("AvgPool3D_")


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_ceil_mode_is_positional_before_name(kind):
    x = np.arange(2 * 5 * 5 * 5, dtype=np.float32).reshape(1, 2, 5, 5, 5)
    pool = flow.nn.max_pool3d if kind == "max" else flow.nn.avg_pool3d
    seen = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 2, 5, 5, 5))) -> tp.Numpy:
        y = pool(x, 2, 2, "VALID", "NCDHW", True, "pooled")
        seen["name"] = y.op_name
        return y

    y = job(x)
    assert seen["name"] == "pooled" and y.shape == (1, 2, 3, 3, 3)
    # the last window of each axis holds the single element 4: ceil_mode pads after, outside the count
    y_ref, _ = pool3d_loops(x, None, kind, 2, 2, [(0, 1)] * 3, "NCDHW")
    np.testing.assert_allclose(y, y_ref, rtol=1e-6)


# flow.layers.conv3d ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["NCDHW", "NDHWC"])
def test_layers_conv3d_variables_values_and_update(fmt):
    x = _last(_normal(2, 4, 4, 5, 4), fmt)
    shape = x.shape
    w0 = _normal(6, 2, 2, 3, 2)  # legacy's layer weight is channels first in both formats
    b0 = _normal(6)
    padding = "SAME" if fmt == "NCDHW" else [[0, 0], [1, 0], [0, 1], [1, 1], [0, 0]]  # layer's own order
    mode = "SAME_LOWER" if fmt == "NCDHW" else [(1, 0), (0, 1), (1, 1)]
    w_fmt = w0 if fmt == "NCDHW" else w0.transpose(0, 2, 3, 4, 1)
    z_ref = conv3d_loops(x, w_fmt, None, [1, 2, 1], mode, fmt, None, 2)[0]
    bias = b0.reshape((1, 6, 1, 1, 1) if fmt == "NCDHW" else (6,))
    y_ref = np.maximum(z_ref + bias, 0)
    t = RNG.normal(size=y_ref.shape).astype(np.float32)
    dz = (y_ref > 0) * t
    _, _, dw_ref = conv3d_loops(x, w_fmt, dz, [1, 2, 1], mode, fmt, None, 2)
    dw_ref = dw_ref if fmt == "NCDHW" else dw_ref.transpose(0, 4, 1, 2, 3)
    db_ref = dz.sum(axis=(0, 2, 3, 4) if fmt == "NCDHW" else (0, 1, 2, 3))
    names = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(shape), t: tp.Numpy.Placeholder(t.shape)) -> tp.Numpy:
        y = flow.layers.conv3d(x, 6, [2, 3, 2], [1, 2, 1], padding, fmt, groups=2, activation=flow.nn.relu,
                               name="L")
        names["y"] = y.op_name
        sgd(flow.math.reduce_sum(y * t))
        return y

    flow.load_variables({"L-weight": w0, "L-bias": b0})
    y = job(x, t)
    store = get_default_session().variables
    assert sorted(n for n in store.names() if n.startswith("L")) == ["L-bias", "L-weight"]
    assert value("L-weight").shape == (6, 2, 2, 3, 2) and names["y"] == "L-activation"
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value("L-weight"), w0 - LR * dw_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value("L-bias"), b0 - LR * db_ref, rtol=1e-4, atol=1e-4)


def test_layers_conv3d_defaults_names_and_trainable():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 3, 4, 4, 4))) -> tp.Numpy:
        a = flow.layers.conv3d(x, 2, 3, padding="SAME", weight_name="wa", bias_name="ba", trainable=False)
        b = flow.layers.conv3d(x, 2, use_bias=False)  # kernel_size 1, VALID
        return a + b

    assert job(np.ones((1, 3, 4, 4, 4), np.float32)).shape == (1, 2, 4, 4, 4)
    store = get_default_session().variables
    assert {"ba", "wa"} <= set(store.names())
    (unnamed,) = [n for n in store.names() if n.startswith("Conv3d_")]
    assert unnamed.endswith("-weight")  # use_bias=False: no bias variable
    assert value(unnamed).shape == (2, 3, 1, 1, 1)
    assert not store["wa"].trainable and not store["ba"].trainable
    np.testing.assert_array_equal(value("ba"), np.zeros(2, np.float32))  # zeros bias by default


# argument errors ------------------------------------------------------------------------------
ERRORS: dict[str, tuple[Any, str]] = {
    "format": (lambda x, w: flow.nn.conv3d(x, w, 1, "VALID", "NCHW"), "conv3d at .*data_format must be"),
    "strides": (lambda x, w: flow.nn.conv3d(x, w, [1, 1], "VALID"), "conv3d at .*strides must be"),
    "padding-mode": (lambda x, w: flow.nn.conv3d(x, w, 1, "FULL"), "conv3d at .*padding must be"),
    "padding-channel": (lambda x, w: flow.nn.conv3d(x, w, 1, [[0, 0], [1, 1], [0, 0], [0, 0], [0, 0]]),
                        "conv3d at .*only D, H and W may be padded"),
    "groups": (lambda x, w: flow.nn.conv3d(x, w, 1, "VALID", groups=3), "groups=3 must divide"),
    "filters": (lambda x, w: flow.nn.conv3d(x, flow.reshape(w, (2, 2, 2, 4)), 1, "VALID"),
                "conv3d at .*filters must be 5-d"),
    "pool-ksize": (lambda x, w: flow.nn.max_pool3d(x, [2, 2], 1, "VALID"), "max_pool3d at .*ksize must be"),
    "pool-batch": (lambda x, w: flow.nn.avg_pool3d(x, [2, 1, 1, 1, 1], 1, "VALID"),
                   "avg_pool3d at .*batch and channel entries must be 1"),
    "pool-empty": (lambda x, w: flow.nn.max_pool3d(x, 5, 1, "VALID"), "max_pool3d.*output would be empty"),
    "layer-kernel": (lambda x, w: flow.layers.conv3d(x, 2, [3, 3]), "layers.conv3d at .*kernel_size must be"),
    "layer-groups": (lambda x, w: flow.layers.conv3d(x, 3, 1, groups=2), "layers.conv3d at .*groups=2 must"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_arguments_name_the_function_and_leave_the_session_usable(case):
    build, message = ERRORS[case]

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((1, 2, 4, 4, 4)), w: tp.Numpy.Placeholder((2, 2, 2, 2, 2))) -> tp.Numpy:
        return build(x, w)

    with pytest.raises(FlowjobError, match=message):
        bad(np.zeros((1, 2, 4, 4, 4), np.float32), np.zeros((2, 2, 2, 2, 2), np.float32))

    @flow.global_function()
    def good(x: tp.Numpy.Placeholder((1, 2, 4, 4, 4)), w: tp.Numpy.Placeholder((2, 2, 2, 2, 2))) -> tp.Numpy:
        return flow.nn.conv3d(x, w, 1, "VALID")

    assert good(np.ones((1, 2, 4, 4, 4), np.float32), np.ones((2, 2, 2, 2, 2), np.float32)).shape == (1, 2, 3, 3, 3)
