"""The legacy activations through real global functions: legacy names, arguments and defaults on flow.nn,
values against numpy (float32 and extreme inputs), node names and errors naming the op and argument."""
from __future__ import annotations

import pathlib
from typing import Any, Callable

import numpy as np
import pytest

import flowjob_core as fc
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session
from flowjob_ops.api import activations, softmax
from flowjob_core.testing.modules import sibling

# the ops package's test helpers (these tests use the oneflow face, so they live here, not in
# packages/ops/tests, whose tox env installs flowjob-ops without the face)
# (a path inside that folder: sibling() loads the helper next to it)
OPS_TESTS = str(pathlib.Path(__file__).resolve().parents[1] / "packages" / "ops" / "tests" / "x.py")


run_job = sibling(OPS_TESTS, "jobs").run_job
RNG = np.random.default_rng(11)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 + 0.5 * np.tanh(x.astype(np.float64) / 2)  # no exp overflow at the extremes


def test_legacy_names_reach_flow_nn() -> None:
    for name in ("leaky_relu", "hardtanh", "relu6", "hardsigmoid", "hardswish", "elu", "selu", "mish", "swish",
                 "logsoftmax"):
        assert getattr(flow.nn, name) is getattr(softmax if name == "logsoftmax" else activations, name)


def test_leaky_relu_default_alpha_is_legacy_0_2() -> None:
    x = np.array([-10, -5, 0, 5, 10], np.float32)
    np.testing.assert_array_equal(run_job(activations.leaky_relu, x), [-2, -1, 0, 5, 10])
    np.testing.assert_allclose(run_job(lambda v: activations.leaky_relu(v, alpha=1.5), x), [-15, -7.5, 0, 5, 10])


def test_clipping_activations() -> None:
    x = RNG.uniform(-9, 9, (4, 6)).astype(np.float32)
    np.testing.assert_array_equal(run_job(activations.hardtanh, x), np.clip(x, -1, 1))
    np.testing.assert_array_equal(run_job(lambda v: activations.hardtanh(v, -3, 2.5), x), np.clip(x, -3, 2.5))
    np.testing.assert_array_equal(run_job(activations.relu6, x), np.clip(x, 0, 6))
    np.testing.assert_allclose(run_job(activations.hardsigmoid, x), np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run_job(activations.hardswish, x), x * np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-6)


def test_exponential_activations_and_their_defaults() -> None:
    x = RNG.uniform(-4, 4, (3, 5)).astype(np.float32)
    elu = np.where(x > 0, x, np.expm1(np.minimum(x, 0)))
    np.testing.assert_allclose(run_job(activations.elu, x), elu, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run_job(lambda v: activations.elu(v, 2.0), x), np.where(x > 0, x, 2 * elu), rtol=1e-6,
                               atol=1e-7)
    scale, alpha = 1.0507009873554805, 1.6732632423543772
    np.testing.assert_allclose(run_job(activations.selu, x), scale * np.where(x > 0, x, alpha * elu), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(run_job(lambda v: activations.selu(v, 1.2, 1.0), x), 1.2 * elu, rtol=1e-6, atol=1e-7)


def test_smooth_activations_stay_finite_at_extremes() -> None:
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0], np.float32)
    with np.errstate(over="raise", invalid="raise"):
        mish, swish, elu = run_job(activations.mish, x), run_job(lambda v: activations.swish(v, beta=2.0),
                                                                 x), run_job(activations.elu, x)
    wide = x.astype(np.float64)
    np.testing.assert_allclose(mish, wide * np.tanh(np.logaddexp(0, wide)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(swish, wide * _sigmoid(2 * wide), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(elu, np.where(wide > 0, wide, np.expm1(np.minimum(wide, 0))), rtol=1e-6)


def test_swish_default_beta_is_silu_and_runs_op_silu() -> None:
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(run_job(activations.swish, x), x * _sigmoid(x), rtol=1e-6, atol=1e-7)
    seen = []

    @fc.global_function()
    def swish_job(v: flow.typing.Numpy.Placeholder((2, 3))) -> flow.typing.Numpy:
        y = activations.swish(v)
        seen.append(y.op_name)
        return y

    swish_job(x)
    assert seen[0].startswith("Swish_")


def test_logsoftmax_is_log_softmax() -> None:
    x = RNG.normal(size=(2, 3, 4))
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(run_job(lambda v, a=axis: softmax.logsoftmax(v, a), x),
                                      run_job(lambda v, a=axis: softmax.log_softmax(v, a), x))


@pytest.mark.parametrize("call, pattern", [
    (lambda v: activations.leaky_relu(v, alpha="0.1"), r"leaky_relu: alpha must be a finite number, got '0.1'"),
    (lambda v: activations.elu(v, alpha=float("nan")), r"elu: alpha must be a finite number, got nan"),
    (lambda v: activations.hardtanh(v, 1.0, -1.0),
     r"hardtanh: min_val must be below max_val, got min_val=1.0, max_val=-1.0"),
    (lambda v: activations.swish(v, beta=None), r"silu: beta must be a finite number, got None"),
    (lambda v: activations.selu(v, scale=float("inf")), r"selu: scale must be a finite number"),
])
def test_bad_arguments_name_the_op_and_argument(call: Callable[[Any], Any], pattern: str) -> None:
    with pytest.raises(fc.OpBuildError, match=pattern):
        run_job(call, np.zeros(3, np.float32))


def test_integer_input_is_refused() -> None:
    with pytest.raises(fc.OpBuildError, match="floating"):
        run_job(activations.relu6, np.zeros(3, np.int32))


def test_prelu_defaults_start_as_relu_with_one_alpha_per_element():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        y = flow.layers.prelu(x)
        assert y.op_name == "PRelu"
        return y

    np.testing.assert_array_equal(job(x), np.maximum(x, 0))
    assert value("PRelu-alpha").shape == (3, 4)
    assert get_default_session().variables["PRelu-alpha"].trainable


def test_prelu_shared_axes_values_and_alpha_update():
    x = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)
    t = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((2, 3, 2, 2)), t: tp.Numpy.Placeholder((2, 3, 2, 2))) -> tp.Numpy:
        y = flow.layers.prelu(x, alpha_initializer=flow.constant_initializer(0.25), shared_axes=[2, 3],
                              name="p1")
        sgd(flow.math.reduce_sum(y * t))
        return y

    y = job(x, t)
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    # d loss / d alpha[c] = sum over the batch and the shared axes of t * x where x <= 0
    grad = np.where(x > 0, 0.0, t * x).sum(axis=(0, 2, 3)).reshape(3, 1, 1)
    np.testing.assert_allclose(value("p1-alpha"), 0.25 - 0.1 * grad, rtol=1e-5, atol=1e-6)


def test_prelu_gradient_of_x():
    x = np.array([[-2.0, -0.5, 0.5, 3.0]], np.float32)
    got = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(1, 4), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = flow.layers.prelu(xv, alpha_initializer=flow.constant_initializer(0.5), trainable=False)
        sgd(flow.math.reduce_sum(y * 3.0))
        return y

    job(x)
    flow.sync_default_session()
    np.testing.assert_allclose(got["dx"], [[1.5, 1.5, 3.0, 3.0]])
    np.testing.assert_array_equal(value("PRelu-alpha"), np.full((4,), 0.5, np.float32))


@pytest.mark.parametrize("axes", [[0], [3], "2"])
def test_prelu_rejects_bad_shared_axes(axes):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return flow.layers.prelu(x, shared_axes=axes)

    with pytest.raises(FlowjobError, match="prelu at .*: shared_axes must"):
        job(np.zeros((2, 3, 4), np.float32))
