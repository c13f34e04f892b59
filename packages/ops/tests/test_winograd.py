"""Winograd convolution (flowjob_ops.kernels.winograd): the transforms are exact, the three kernels
match im2col + GEMM (to float64 rounding, and within float32 tolerance at LeNet's shapes), and a job
picks Winograd where it pays and gives the im2col job's losses and gradients."""

import sys
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_ops.plugin
import flowjob_typing as tp
import flowjob_typing.plugin
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import activations, initializers, layers
from flowjob_ops.api import conv as conv_api
from flowjob_ops.api import losses as losses_api
from flowjob_ops.api import pool as pool_api
from flowjob_ops.api.array import reshape
import flowjob_ops.overrides.cpu as cpu_overrides
from flowjob_ops.overrides.cpu import conv as cpu_conv
from flowjob_ops.kernels import winograd
from flowjob_ops.kernels.conv2d_bias_pool import Conv2dBiasPool
from flowjob_ops.kernels.conv2d_forward import Conv2dForward
from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter

probe = sibling(__file__, "grad_probe")


@pytest.mark.parametrize("m, r", [(6, 3), (5, 4), (4, 5)])
def test_the_1d_algorithm_is_exact(m: int, r: int) -> None:
    # y_k = sum_j g_j d_(k+j) for every g, d: sum_i AT[k,i] G[i,j] BT[i,l] == [l == k + j]
    at, g, bt = winograd.exact_matrices(m, r)
    for k in range(m):
        for j in range(r):
            for ell in range(winograd.ALPHA):
                total = sum((at[k][i] * g[i][j] * bt[i][ell] for i in range(winograd.ALPHA)), Fraction(0))
                assert total == (1 if ell == k + j else 0), (k, j, ell)


def test_matrices_refuse_other_tile_sizes() -> None:
    with pytest.raises(ValueError, match="8-point"):
        winograd.exact_matrices(4, 3)


def _arrays(x_shape: tuple, w_shape: tuple, dtype: Any, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)


def _shapes(n: int, c: int, h: int, w: int, f: int, r: int, fmt: str) -> tuple[tuple, tuple]:
    if fmt == "NCHW":
        return (n, c, h, w), (f, c, r, r)
    return (n, h, w, c), (f, r, r, c)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30))


CASES = [
    ((2, 3, 14, 14, 4, 5), "SAME"),
    ((2, 3, 9, 11, 4, 5), "VALID"),
    ((2, 3, 9, 11, 4, 3), "SAME"),
    ((1, 2, 6, 5, 3, 3), "VALID"),  # a single partial tile
    ((2, 3, 9, 11, 4, 4), ((1, 2), (0, 3))),  # uneven explicit pads, even kernel
    ((3, 5, 7, 6, 2, 3), ((2, 0), (1, 1))),
]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dims, pads", CASES)
def test_kernels_match_im2col_in_float64(dims: tuple, pads: Any, fmt: str) -> None:
    n, c, h, w_, f, r = dims
    x_shape, w_shape = _shapes(n, c, h, w_, f, r, fmt)
    x, w = _arrays(x_shape, w_shape, np.float64)
    geom = ConvGeometry.create(x_shape, w_shape, 1, pads, 1, 1, fmt)
    assert winograd.applicable(geom)
    forward = winograd.WinogradForward(np, geom, np.float64)
    y = forward(x, w)
    want = Conv2dForward(np, geom, np.float64)(x, w)
    assert y.shape == want.shape and _relative(y, want) < 1e-12
    dy = np.random.default_rng(2).standard_normal(want.shape)
    dx = winograd.WinogradBackwardData(np, geom, np.float64)(dy, w)
    want_dx = Conv2dBackwardData(np, geom, np.float64)(dy, w)
    assert dx.shape == want_dx.shape and _relative(dx, want_dx) < 1e-12
    want_dw = Conv2dBackwardFilter(np, geom, np.float64)(x, dy)
    shared = winograd.WinogradBackwardFilter(np, geom, np.float64, forward=forward)
    assert _relative(shared(x, dy, reuse=True), want_dw) < 1e-12
    alone = winograd.WinogradBackwardFilter(np, geom, np.float64)
    assert _relative(alone(x, dy, reuse=True), want_dw) < 1e-12


def _one_thread_per_chunk(body: Any, count: int) -> None:
    """A ``Backend.parallel`` that runs every part on a thread of its own, all at once."""
    import threading

    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            body(k, k + 1)
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_chunks_on_threads_give_the_bits_of_one_thread(fmt: str) -> None:
    # 9 images: MIN_CHUNKS makes 3 chunks of 3, each with its own thread's scratch; the filter gradient's
    # per-chunk sums are added in chunk order, so every result is bitwise the serial one
    x_shape, w_shape = _shapes(9, 6, 11, 10, 8, 5, fmt)
    x, w = _arrays(x_shape, w_shape, np.float32)
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, fmt)
    dy = np.random.default_rng(4).standard_normal(geom.y_shape).astype(np.float32)
    results = []
    for parallel in (None, _one_thread_per_chunk):
        forward = winograd.WinogradForward(np, geom, np.float32, parallel=parallel)
        y = forward(x, w).copy()
        dx = winograd.WinogradBackwardData(np, geom, np.float32, parallel=parallel)(dy, w).copy()
        dw = winograd.WinogradBackwardFilter(np, geom, np.float32, forward=forward, parallel=parallel)(
            x, dy, reuse=True).copy()
        dw_alone = winograd.WinogradBackwardFilter(np, geom, np.float32, parallel=parallel)(x, dy).copy()
        results.append((y, dx, dw, dw_alone))
    assert len(winograd.WinogradForward(np, geom, np.float32).shape.chunks) == 3
    for serial, threaded in zip(*results):
        np.testing.assert_array_equal(serial, threaded)
    want = Conv2dForward(np, geom, np.float64)(x.astype(np.float64), w.astype(np.float64))
    assert _relative(results[1][0], want) < 2e-5


def test_the_filter_gradient_rebuilds_the_transform_for_another_array() -> None:
    x_shape, w_shape = (2, 3, 8, 8), (4, 3, 5, 5)
    x, w = _arrays(x_shape, w_shape, np.float64)
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, "NCHW")
    forward = winograd.WinogradForward(np, geom, np.float64)
    forward(x, w)
    other = x[::-1].copy()
    dy = np.random.default_rng(3).standard_normal((2, 4, 8, 8))
    got = winograd.WinogradBackwardFilter(np, geom, np.float64, forward=forward)(other, dy, reuse=True)
    want = Conv2dBackwardFilter(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME"), np.float64)(other, dy)
    assert _relative(got, want) < 1e-12


def test_float32_error_at_lenet_conv2_is_that_of_im2col() -> None:
    x_shape, w_shape = (100, 32, 14, 14), (64, 32, 5, 5)
    rng = np.random.default_rng(0)
    x = rng.random(x_shape, dtype=np.float32)
    w = (rng.standard_normal(w_shape) * np.sqrt(2 / 800)).astype(np.float32)
    dy = rng.standard_normal((100, 64, 14, 14)).astype(np.float32)
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, "NCHW")
    exact = Conv2dForward(np, geom, np.float64)(x.astype(np.float64), w.astype(np.float64))
    im2col = Conv2dForward(np, geom, np.float32)(x, w)
    forward = winograd.WinogradForward(np, geom, np.float32)
    y = forward(x, w)
    assert _relative(y, exact) < max(5 * _relative(im2col, exact), 2e-5)
    exact_dx = Conv2dBackwardData(np, geom, np.float64)(dy.astype(np.float64), w.astype(np.float64))
    assert _relative(winograd.WinogradBackwardData(np, geom, np.float32)(dy, w), exact_dx) < 2e-5
    exact_dw = Conv2dBackwardFilter(np, geom, np.float64)(x.astype(np.float64), dy.astype(np.float64))
    dw = winograd.WinogradBackwardFilter(np, geom, np.float32, forward=forward)(x, dy, reuse=True)
    assert dw.dtype == np.float32 and _relative(dw, exact_dw) < 5e-5


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_bias_relu_epilogue_and_pooled_form_match_im2col(fmt: str) -> None:
    x_shape, w_shape = _shapes(3, 4, 12, 12, 5, 5, fmt)
    x, w = _arrays(x_shape, w_shape, np.float64)
    b = np.random.default_rng(4).standard_normal(5)
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, fmt)
    got = winograd.WinogradForward(np, geom, np.float64, bias=True, relu=True)(x, w, b)
    want = Conv2dForward(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME", data_format=fmt),
                         np.float64, bias=True, relu=True)
    assert _relative(got, want(x, w, b)) < 1e-12
    for pool in [(2, 2, "VALID"), (3, 2, "SAME")]:
        pooled = Conv2dBiasPool(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME", data_format=fmt),
                                np.float64, pool=pool, relu=True, algorithm="winograd")(x, w, b)
        reference = Conv2dBiasPool(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME", data_format=fmt),
                                   np.float64, pool=pool, relu=True)(x, w, b)
        assert pooled.shape == reference.shape and _relative(pooled, reference) < 1e-12


def test_kernels_name_a_wrong_shape() -> None:
    geom = ConvGeometry.create((2, 3, 8, 8), (4, 3, 3, 3), 1, "SAME", 1, 1, "NCHW")
    forward = winograd.WinogradForward(np, geom, np.float32)
    with pytest.raises(ValueError, match=r"conv2d input has shape \(2, 3, 8, 9\)"):
        forward(np.zeros((2, 3, 8, 9), np.float32), np.zeros((4, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="conv2d bias"):
        winograd.WinogradForward(np, geom, np.float32, bias=True)(np.zeros((2, 3, 8, 8), np.float32),
                                                                   np.zeros((4, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="dy has shape"):
        winograd.WinogradBackwardData(np, geom, np.float32)(np.zeros((2, 4, 8, 7), np.float32),
                                                            np.zeros((4, 3, 3, 3), np.float32))
    strided = ConvGeometry.create((2, 3, 8, 8), (4, 3, 3, 3), 2, "SAME", 1, 1, "NCHW")
    with pytest.raises(ValueError, match="stride-1"):
        winograd.WinogradForward(np, strided, np.float32)


@pytest.mark.parametrize("args, expected", [
    (((2, 32, 14, 14), (64, 32, 5, 5), 1, "SAME", 1, 1), "winograd"),
    (((2, 1, 28, 28), (32, 1, 5, 5), 1, "SAME", 1, 1), "im2col"),  # one input channel: GEMMs degenerate
    (((2, 32, 14, 14), (64, 32, 5, 5), 2, "SAME", 1, 1), "im2col"),  # strided
    (((2, 32, 14, 14), (64, 16, 5, 5), 1, "SAME", 1, 2), "im2col"),  # grouped
    (((2, 32, 14, 14), (64, 32, 7, 7), 1, "SAME", 1, 1), "im2col"),  # kernel too large for 8-point tiles
    (((2, 32, 14, 14), (64, 32, 3, 3), 1, "SAME", 2, 1), "im2col"),  # dilated
])
def test_automatic_choice(args: tuple, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWJOB_CONV_ALGORITHM", raising=False)
    assert cpu_conv.algorithm(ConvGeometry.create(*args, "NCHW")) == expected


def test_the_environment_overrides_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    small = ConvGeometry.create((2, 2, 8, 8), (3, 2, 3, 3), 1, "SAME", 1, 1, "NCHW")
    large = ConvGeometry.create((2, 32, 14, 14), (64, 32, 5, 5), 1, "SAME", 1, 1, "NCHW")
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "winograd")
    assert cpu_conv.algorithm(small) == "winograd"
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "im2col")
    assert cpu_conv.algorithm(large) == "im2col"
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", " Winograd ")  # read through flowjob_core.switches
    assert cpu_conv.algorithm(small) == "winograd"
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "fft")
    with pytest.raises(fc.ConfigError, match="FLOWJOB_CONV_ALGORITHM='fft': expected one of auto, im2col, winograd"):
        cpu_conv.algorithm(large)


# jobs ---------------------------------------------------------------------------------------------
N = 4
VARIABLES = ("conv1-weight", "conv1-bias", "conv2-weight", "conv2-bias", "dense-weight", "dense-bias")


@fc.hookimpl
def flowjob_add_backends(registry: Any) -> None:
    """(This module as a plugin) a third backend: numpy under the tag "xpu", with no kernel overrides."""
    registry.add(fc.Backend(tag="xpu", name="numpy as xpu", xp=np, make_rng=np.random.default_rng))


def _train(algorithm: str, monkeypatch: pytest.MonkeyPatch, steps: int = 2, *, cpu_overrides: bool = True,
           device: str = "cpu") -> tuple[list, dict, list]:
    """Losses, probed gradients and plan kernels of a small conv net's train steps; without
    ``cpu_overrides`` the session's kernel registry has none (the records' reference kernels run);
    ``device="xpu"`` runs the session on this module's backend."""
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", algorithm)
    monkeypatch.setenv("FLOWJOB_DEVICE", device)
    rng = np.random.default_rng(5)
    images = rng.random((N, 1, 12, 12), dtype=np.float32)
    labels = rng.integers(0, 5, N).astype(np.int32)
    if device == "cpu":
        session = probe.session_with_probe()
    else:  # session_with_probe's plugins and this module's backend
        plugins = [flowjob_ops.plugin, flowjob_typing.plugin, probe, sys.modules[__name__]]
        session = fc.Session(fc.make_plugin_manager(plugins=plugins, autoload=False))
    if not cpu_overrides:
        for op in session.registries.kernels.overrides("cpu"):
            session.registries.kernels.remove(op, "cpu")
    try:
        @probe.job(session)
        def train_job(x: tp.Numpy.Placeholder((N, 1, 12, 12)), y: tp.Numpy.Placeholder((N,), dtype=np.int32)
                      ) -> tp.Numpy:
            init = initializers.random_normal_initializer(stddev=0.2)
            a1 = layers.conv2d(x, 16, 5, padding="SAME", activation=activations.relu, name="conv1",
                               kernel_initializer=init)
            p1 = pool_api.max_pool2d(a1, 2, 2, "SAME", name="pool1")
            a2 = layers.conv2d(p1, 16, 5, padding="SAME", activation=activations.relu, name="conv2",
                               kernel_initializer=init)
            p2 = pool_api.max_pool2d(a2, 2, 2, "SAME", name="pool2")
            logits = layers.dense(reshape(p2, [N, -1]), 5, kernel_initializer=init, name="dense")
            loss = losses_api.sparse_softmax_cross_entropy_with_logits(y, logits)
            fc.add_loss(loss)
            shapes = {"conv1-weight": (16, 1, 5, 5), "conv1-bias": (16,), "conv2-weight": (16, 16, 5, 5),
                      "conv2-bias": (16,), "dense-weight": (5, 144), "dense-bias": (5,)}
            for name in VARIABLES:
                probe.probe(fc.get_variable(name, shape=shapes[name]), name)
            probe.probe(x, "images")
            return loss

        losses = []
        for _ in range(steps):
            probe.RESULTS.clear()
            losses.append(np.array(train_job(images, labels), copy=True))
        kernels = list(train_job.plan().step.__globals__.values())
        return losses, dict(probe.RESULTS), kernels
    finally:
        session.close()


def test_a_train_job_uses_winograd_where_it_pays_and_matches_im2col(monkeypatch: pytest.MonkeyPatch) -> None:
    losses, grads, kernels = _train("auto", monkeypatch)
    ref_losses, ref_grads, ref_kernels = _train("im2col", monkeypatch)
    kinds = {type(k) for k in kernels}
    # conv2 (16 -> 16 channels) forward and data gradient run Winograd; conv1 (1 channel) stays im2col
    assert {winograd.WinogradForward, winograd.WinogradBackwardData} <= kinds
    assert not {winograd.WinogradForward, winograd.WinogradBackwardData} & {type(k) for k in ref_kernels}
    for got, want in zip(losses, ref_losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert set(grads) == set(ref_grads) == set(VARIABLES) | {"images"}
    for key in grads:
        np.testing.assert_allclose(grads[key], ref_grads[key], rtol=1e-4,
                                   atol=1e-5 * max(1.0, float(np.abs(ref_grads[key]).max())))


def test_a_bad_algorithm_name_fails_the_plan_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    session = probe.session_with_probe()
    monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "fastest")  # read when the plan is built
    try:
        @probe.job(session, "predict")
        def job(x: tp.Numpy.Placeholder((1, 16, 6, 6))) -> tp.Numpy:
            w = fc.get_variable("w", shape=(16, 16, 3, 3), initializer=initializers.random_normal_initializer())
            return conv_api.conv2d(x, w, 1, "SAME")

        with pytest.raises(fc.ConfigError, match="FLOWJOB_CONV_ALGORITHM='fastest': expected one of"):
            job(np.zeros((1, 16, 6, 6), np.float32))
        monkeypatch.setenv("FLOWJOB_CONV_ALGORITHM", "auto")
        assert job(np.ones((1, 16, 6, 6), np.float32)).shape == (1, 16, 6, 6)  # the session stays usable
    finally:
        session.close()


@pytest.mark.parametrize("chunk_bytes", [1, 150_000, 1 << 40])  # one image a chunk, uneven chunks, one chunk
def test_chunked_batches_give_the_same_results(chunk_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(winograd, "CHUNK_BYTES", chunk_bytes)
    x_shape, w_shape = (7, 3, 9, 10), (4, 3, 5, 5)
    x, w = _arrays(x_shape, w_shape, np.float64)
    dy = np.random.default_rng(6).standard_normal((7, 4, 9, 10))
    geom = ConvGeometry.create(x_shape, w_shape, 1, "SAME", 1, 1, "NCHW")
    forward = winograd.WinogradForward(np, geom, np.float64)
    if chunk_bytes == 150_000:
        assert len({hi - lo for lo, hi in forward.shape.chunks}) == 2  # a shorter last chunk
    assert _relative(forward(x, w), Conv2dForward(np, geom, np.float64)(x, w)) < 1e-12
    want_dx = Conv2dBackwardData(np, geom, np.float64)(dy, w)
    assert _relative(winograd.WinogradBackwardData(np, geom, np.float64)(dy, w), want_dx) < 1e-12
    want_dw = Conv2dBackwardFilter(np, ConvGeometry.create(x_shape, w_shape, 1, "SAME"), np.float64)(x, dy)
    got = winograd.WinogradBackwardFilter(np, geom, np.float64, forward=forward)(x, dy, reuse=True)
    assert _relative(got, want_dw) < 1e-12


def test_a_plugin_backend_runs_the_reference_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLOWJOB_DEVICE=xpu: the same numpy arrays under a tag without overrides run im2col and the
    reference pooling, and train as the cpu backend does."""
    losses, grads, kernels = _train("auto", monkeypatch)
    xpu_losses, xpu_grads, xpu_kernels = _train("auto", monkeypatch, device="xpu")
    assert not {winograd.WinogradForward, winograd.WinogradBackwardData} & {type(k) for k in xpu_kernels}
    assert not any(type(k).__module__ == "flowjob_ops.overrides.cpu.pool_cache_blocked" for k in xpu_kernels)
    for got, want in zip(xpu_losses, losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for key in grads:
        np.testing.assert_allclose(xpu_grads[key], grads[key], rtol=1e-4,
                                   atol=1e-5 * max(1.0, float(np.abs(grads[key]).max())))


def test_the_cpu_overrides_are_registered_and_the_records_keep_im2col() -> None:
    session = probe.session_with_probe()
    try:
        kernels, ops = session.registries.kernels, session.registries.ops
        for name, builder in cpu_overrides.KERNEL_BUILDERS.items():
            assert kernels.lookup(ops[name], "cpu") is builder
            assert kernels.lookup(ops[name], "gpu") is ops[name].kernel  # other backends: the reference
        assert {"conv2d", "conv2d_bias", "conv2d_grad_data", "conv2d_grad_filter"} <= set(kernels.overrides("cpu"))
    finally:
        session.close()


@pytest.mark.parametrize("algorithm", ["auto", "winograd"])
def test_without_the_cpu_overrides_a_job_runs_the_reference_kernels(algorithm: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry without the overrides (as any other backend sees it): im2col everywhere, whatever
    FLOWJOB_CONV_ALGORITHM says, and the overrides' losses and gradients within float32 rounding."""
    losses, grads, kernels = _train(algorithm, monkeypatch)
    ref_losses, ref_grads, ref_kernels = _train(algorithm, monkeypatch, cpu_overrides=False)
    winograd_kinds = {winograd.WinogradForward, winograd.WinogradBackwardData}
    assert winograd_kinds <= {type(k) for k in kernels}
    assert not winograd_kinds & {type(k) for k in ref_kernels}
    assert not any(type(k).__module__ == "flowjob_ops.overrides.cpu.pool_cache_blocked" for k in ref_kernels)
    for got, want in zip(losses, ref_losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for key in grads:
        np.testing.assert_allclose(grads[key], ref_grads[key], rtol=1e-4,
                                   atol=1e-5 * max(1.0, float(np.abs(ref_grads[key]).max())))
