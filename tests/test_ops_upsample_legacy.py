"""flow.layers.upsample_2d (legacy v0.4) against numpy: nearest and bilinear, both formats, values and
gradients, and its argument checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, train_grad = _helpers.fresh_session, _helpers.train_grad


def test_upsample_2d_nearest_repeats_pixels_in_both_formats():
    x = RNG.normal(size=(2, 3, 2, 3)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 2, 3))) -> tuple[tp.Numpy, tp.Numpy]:
        nchw = flow.layers.upsample_2d(x, size=(2, 3), name="Up1")
        nhwc = flow.layers.upsample_2d(flow.transpose(x, perm=[0, 2, 3, 1]), size=(2, 3), data_format="NHWC",
                                       name="Up2")
        return nchw, nhwc

    nchw, nhwc = job(x)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    np.testing.assert_array_equal(nchw, want)
    np.testing.assert_array_equal(nhwc, want.transpose(0, 2, 3, 1))


def _bilinear(x, scale, align):
    n, c, h, w = x.shape
    oh, ow = int(scale * h), int(scale * w)

    def taps(o, size, out_size):
        pos = o * (size - 1) / (out_size - 1) if align else max((o + 0.5) / scale - 0.5, 0.0)
        lo, hi = min(int(math.floor(pos)), size - 1), min(int(math.ceil(pos)), size - 1)
        return lo, hi, pos - math.floor(pos)

    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        t, b, fh = taps(i, h, oh)
        for j in range(ow):
            le, r, fw = taps(j, w, ow)
            top = x[:, :, t, le] + (x[:, :, t, r] - x[:, :, t, le]) * fw
            bottom = x[:, :, b, le] + (x[:, :, b, r] - x[:, :, b, le]) * fw
            y[:, :, i, j] = top + (bottom - top) * fh
    return y


@pytest.mark.parametrize("align", [False, True])
def test_upsample_2d_bilinear_values_and_gradient(align):
    x = RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)
    w = RNG.normal(size=(1, 2, 6, 6)).astype(np.float32)
    y, dx = train_grad((1, 2, 3, 3), lambda v, w: flow.layers.upsample_2d(
        v, size=2, align_corners=align, interpolation="bilinear") * w, x, w)
    np.testing.assert_allclose(y, _bilinear(x, 2, align) * w, rtol=1e-5, atol=1e-6)
    # the map is linear: its gradient is the transpose applied to w, found here column by column
    basis = np.eye(9).reshape(9, 1, 1, 3, 3)
    want = np.stack([(_bilinear(np.broadcast_to(b, (1, 2, 3, 3)), 2, align) * w).sum((2, 3))
                     for b in basis], -1).reshape(1, 2, 3, 3)
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"interpolation": "cubic"}, 'interpolation must be "nearest" or "bilinear"'),
    ({"align_corners": True}, 'interpolation "nearest" does not support align_corners'),
    ({"data_format": "NCW"}, 'data_format must be "NHWC" or "NCHW"'),
])
def test_upsample_2d_refuses_bad_arguments(kwargs, message):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1, 1, 2, 2))) -> tp.Numpy:
        return flow.layers.upsample_2d(x, **kwargs)

    with pytest.raises(FlowjobError, match=f"upsample_2d at .*{message}"):
        job(np.zeros((1, 1, 2, 2), np.float32))
