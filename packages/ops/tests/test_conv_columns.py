"""A conv filter gradient reuses its forward convolution's im2col matrix within a plan, and stays exact."""
from __future__ import annotations


import numpy as np

import flowjob_typing as tp
from flowjob_core import add_loss
from flowjob_ops.api import conv
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter
from flowjob_core.testing.modules import sibling


probe = sibling(__file__, "grad_probe")


def test_filter_gradient_reuses_the_forward_columns(monkeypatch):
    reused = []
    original = Conv2dBackwardFilter.__call__

    def spy(self, x, dy, *args, **kwargs):
        reused.append(kwargs.get("reuse_cols", False))
        return original(self, x, dy, *args, **kwargs)

    monkeypatch.setattr(Conv2dBackwardFilter, "__call__", spy)
    session = probe.session_with_probe()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6))
    w_value = rng.standard_normal((4, 3, 3, 3))

    @probe.job(session)
    def train(x_in: tp.Numpy.Placeholder((2, 3, 6, 6), dtype=np.float64),
              w_in: tp.Numpy.Placeholder((4, 3, 3, 3), dtype=np.float64)) -> None:
        y = conv.conv2d(x_in, w_in, strides=1, padding="SAME")
        probe.probe(w_in, "dw")
        add_loss(y)

    train(x, w_value)
    session.sync()
    assert reused == [True]
    # d(sum y)/dw[f, c, i, j] = sum over n, output positions of the padded input window
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.stack([np.array([[[padded[:, c, i:i + 6, j:j + 6].sum() for j in range(3)]
                                    for i in range(3)] for c in range(3)])] * 4)
    np.testing.assert_allclose(probe.RESULTS["dw"], expected, rtol=1e-10)
    session.close()


import pytest  # noqa: E402


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("x_shape, w_shape, strategy", [
    ((3, 1, 9, 9), (4, 1, 3, 3), "cols"),
    ((3, 6, 9, 9), (4, 6, 3, 3), "rows"),
    ((3, 6, 9, 9), (4, 6, 3, 3), "cols"),
])
@pytest.mark.parametrize("epilogue", [(False, False), (True, False), (True, True)])
def test_strided_output_is_the_contiguous_output_without_the_layout_pass(fmt, x_shape, w_shape, strategy, epilogue):
    if fmt == "NHWC":
        x_shape = (x_shape[0], x_shape[2], x_shape[3], x_shape[1])
        w_shape = (w_shape[0], w_shape[2], w_shape[3], w_shape[1])
    bias, relu = epilogue
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])
    args = (x, w, b) if bias else (x, w)
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", data_format=fmt)
    options = dict(strategy=strategy, bias=bias, relu=relu)
    contiguous = Conv2dForward(np, geom, np.float64, **options)(*args)
    strided = Conv2dForward(np, geom, np.float64, **options, strided_output=True)(*args)
    assert strided.shape == contiguous.shape
    np.testing.assert_array_equal(strided, contiguous)


@pytest.mark.parametrize("order", ["nchw", "fnhw"])
def test_filter_gradient_takes_dy_in_either_memory_order(order):
    rng = np.random.default_rng(4)
    x_shape, w_shape = (3, 1, 8, 8), (5, 1, 3, 3)
    x = rng.standard_normal(x_shape)
    dy = rng.standard_normal((3, 5, 8, 8))
    if order == "fnhw":  # the memory order of a column-layout conv output's gradient
        dy = np.ascontiguousarray(dy.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    got = Conv2dBackwardFilter(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME"), np.float64, strategy="cols")(x, dy)
    want = Conv2dBackwardFilter(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME"),
                                np.float64, strategy="rows")(x, dy)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
