"""Legacy's quantization-aware training ops, partial-FC class sampling, amp_white_identity and the profiler
marks in real jobs: straight-through gradients, moving ranges kept across steps, sampled rows' gradients."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _sgd(lr: float = 0.0):
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]))


def test_fake_quantization_passes_the_gradient_straight_through():
    x0 = RNG.standard_normal((3, 4)).astype(np.float32)
    seen = {}

    @flow.global_function(type="train")
    def job() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 4), initializer=flow.constant_initializer(0.0))
        x = w + flow.constant(x0, dtype=flow.float32)
        scale, zero = flow.quantization.min_max_observer(x, 4, "symmetric", False)  # v0.3's arguments
        y = flow.quantization.fake_quantization(x, scale, zero, quantization_bit=4)
        flow.watch_diff(w, lambda d: seen.setdefault("dw", d))
        _sgd().minimize(flow.math.reduce_sum(y * y))
        return y

    y = job()
    scale = np.abs(x0).max(axis=1, keepdims=True) / 7
    np.testing.assert_allclose(y, np.clip(np.rint(x0 / scale), -8, 7) * scale, rtol=1e-6)
    # d(sum y^2)/dy = 2y, passed to x (and w) unchanged
    np.testing.assert_allclose(seen["dw"], 2 * y, rtol=1e-6)


def test_the_moving_range_moves_while_training_and_is_read_when_predicting():
    batches = [RNG.uniform(-1, 1, (8,)).astype(np.float32) * k for k in (1.0, 3.0)]

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(8,), initializer=flow.constant_initializer(1.0))
        y = x * w
        scale, zero = flow.quantization.moving_average_min_max_observer(
            y, quantization_scheme="affine", momentum=0.9, name="obs")
        _sgd().minimize(flow.math.reduce_sum(flow.quantization.fake_quantization(
            y, scale, zero, quantization_scheme="affine")))
        return scale

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((8,))) -> tp.Numpy:
        scale, _ = flow.quantization.moving_average_min_maxObserver(x, 8, "affine", 0.5, "obs")  # v0.3's order
        return scale

    high, low = batches[0].max(), batches[0].min()
    np.testing.assert_allclose(train(batches[0]), [(high - low) / 255], rtol=1e-6)
    high, low = 0.9 * high + 0.1 * batches[1].max(), 0.9 * low + 0.1 * batches[1].min()
    np.testing.assert_allclose(train(batches[1]), [(high - low) / 255], rtol=1e-5)
    # predicting reads the same variables and leaves them
    np.testing.assert_allclose(predict(batches[1] * 10), [(high - low) / 255], rtol=1e-5)
    variables = flow.get_all_variables()
    np.testing.assert_allclose(variables["obs-moving_max"].numpy(), [high], rtol=1e-6)
    np.testing.assert_allclose(variables["obs-moving_min"].numpy(), [low], rtol=1e-6)


def test_bad_quantization_settings_name_the_op():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.quantization.min_max_observer(x, quantization_bit=9)[0]

    with pytest.raises(OpBuildError, match=r"min_max_observer.*quantization_bit must be an int in \[2, 8\], got 9"):
        job(np.zeros((2, 3), np.float32))


def test_partial_fc_sample_keeps_every_label_and_scatters_the_gradient_back():
    label = np.array([7, 2, 7, 5], np.int32)
    seen = {}

    @flow.global_function(type="train")
    def job(lbl: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        weight = flow.get_variable("fc", shape=(10, 3), initializer=flow.random_normal_initializer(seed=1))
        mapped, sampled, rows = flow.distributed_partial_fc_sample(weight, lbl, num_sample=6)
        flow.watch(mapped, lambda v: seen.setdefault("mapped", v))
        flow.watch(sampled, lambda v: seen.setdefault("sampled", v))
        flow.watch_diff(weight, lambda d: seen.setdefault("dw", d))
        _sgd().minimize(flow.math.reduce_sum(rows * flow.constant(np.arange(6, dtype=np.float32).reshape(6, 1))))
        return rows

    rows = job(label)
    sampled = seen["sampled"]
    assert sampled[:3].tolist() == [2, 5, 7] and len(set(sampled.tolist())) == 6  # positives first, in order
    assert seen["mapped"].tolist() == [2, 0, 2, 1]  # each label's place among the sampled classes
    np.testing.assert_array_equal(rows, flow.get_all_variables()["fc"].numpy()[sampled])
    expected = np.zeros((10, 3), np.float32)
    expected[sampled] = np.arange(6, dtype=np.float32).reshape(6, 1)
    np.testing.assert_array_equal(seen["dw"], expected)


def test_amp_white_identity_linalg_matmul_and_constant_scalar():
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        return flow.amp_white_identity(flow.linalg.matmul(x, y)) * flow.constant_scalar(2.0, dtype=flow.float)

    np.testing.assert_allclose(job(a, b), 2 * a @ b, rtol=1e-5)


def test_profiler_ranges_are_timed_and_logged(caplog):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        y = flow.profiler.nvtx_start(x, mark_prefix="block")
        return flow.profiler.nvtx_end(flow.math.exp(y), mark_prefix="block")

    with caplog.at_level(logging.DEBUG, logger="flowjob.profiler"):
        flow.profiler.range_push("outer")
        out = job(np.zeros(4, np.float32))
        flow.profiler.range_pop()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))
    messages = [r.getMessage() for r in caplog.records if r.name == "flowjob.profiler"]
    assert any(m.startswith("range 'block': ") for m in messages)
    assert any(m.startswith("range 'outer': ") for m in messages)
    with pytest.raises(Exception, match="range_pop: no range is open"):
        flow.profiler.range_pop()


def test_partial_fc_sample_over_several_devices_samples_each_shard_of_classes():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def job(lbl: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> tuple[tp.Numpy, tp.Numpy]:
        weight = flow.get_variable("fc", shape=(8, 2), initializer=flow.random_normal_initializer(seed=2))
        with flow.scope.placement("cpu", "0:0-1"):  # legacy split the classes over these devices
            mapped, sampled, _ = flow.distributed_partial_fc_sample(weight, lbl, num_sample=4)
        return mapped, sampled

    mapped, sampled = job(np.array([1, 6, 1], np.int32))
    assert sampled[0] == 1 and sampled[1] in range(4) and sampled[2] == 6 and sampled[3] in range(4, 8)
    assert len(set(sampled.tolist())) == 4 and mapped.tolist() == [0, 2, 0]


@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
def test_a_range_of_one_value_keeps_the_values_exact(scheme):
    # legacy divided by the range's width 0 here and computed NaN
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        scale, zero = flow.quantization.min_max_observer(x, quantization_scheme=scheme)
        return flow.quantization.fake_quantization(x, scale, zero, quantization_scheme=scheme)

    for value in (0.75, -2.0, 0.0):
        x = np.full((2, 3), value, np.float32)
        np.testing.assert_allclose(job(x), x, rtol=1e-6)


@pytest.mark.parametrize("per_layer", [True, False])
def test_an_affine_range_that_does_not_reach_zero_quantizes_within_half_a_step(per_layer):
    # all negative (or all positive) rows: zero points above 255 (or below 0), used as they are
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
        scale, zero = flow.quantization.min_max_observer(x, quantization_scheme="affine",
                                                         per_layer_quantization=per_layer)
        return flow.quantization.fake_quantization(x, scale, zero, quantization_scheme="affine")

    x = np.array([[-2.3, -0.7, -0.22, -1.1], [0.4, 1.9, 0.35, 1.2]] if not per_layer
                 else [[-2.3, -0.7, -0.22, -1.1], [-0.4, -1.9, -0.35, -1.2]], np.float32)
    rows = x if not per_layer else x.reshape(1, -1)
    step = (rows.max(axis=1) - rows.min(axis=1)) / 255
    got = job(x).reshape(rows.shape)
    assert np.all(np.abs(got - rows) <= step[:, None] / 2 + 1e-6)
