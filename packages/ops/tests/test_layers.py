"""flow.layers.dense and conv2d: legacy names, variables, defaults, values and errors."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_ops.api import activations, initializers, layers


def _sibling(stem: str) -> Any:
    name = f"_flowjob_ops_tests_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).resolve().with_name(f"{stem}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


loops = _sibling("reference_loops")
RNG = np.random.default_rng(11)


def test_unnamed_dense_uses_one_counter_id_and_the_version_0_1_names() -> None:
    seen: dict[str, Any] = {}
    observed: list[str] = []

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((8, 784))) -> tp.Numpy:
        with fc.scope.observe_blobs(lambda blob: observed.append(blob.lbn)):
            seen["hidden"] = layers.dense(x, 16, activation=activations.relu,
                                          kernel_initializer=initializers.truncated_normal(0.1))
            seen["logits"] = layers.dense(seen["hidden"], 10)
        return seen["logits"]

    job(np.zeros((8, 784), np.float32))
    first = seen["hidden"].lbn.split("_activation")[0]
    second = seen["logits"].lbn.split("_bias_add")[0]
    assert first.startswith("Dense_") and second == f"Dense_{int(first.split('_')[1]) + 1}"
    assert observed[-4:] == [f"{second}-weight/out", f"{second}_matmul/out_0", f"{second}-bias/out",
                             f"{second}_bias_add/out_0"]
    assert f"{first}_activation/out_0" in observed


def test_named_dense_in_a_namespace() -> None:
    names: list[str] = []

    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        with fc.scope.namespace("net"):
            y = layers.dense(x, 4, activation=activations.relu, name="hidden")
        names.append(y.lbn)
        return y

    job(np.zeros((2, 3), np.float32))
    assert names == ["net-hidden_activation/out_0"]
    session = fc.get_default_session()
    assert {"net-hidden-weight", "net-hidden-bias"} <= set(session.variables.names())
    assert session.variables["net-hidden-weight"].spec.shape == (4, 3)


def test_dense_values_with_default_zero_initializers_and_given_ones() -> None:
    x = RNG.normal(size=(5, 3)).astype(np.float32)

    @fc.global_function()
    def job(a: tp.Numpy.Placeholder((5, 3))) -> tp.Numpy:
        zero = layers.dense(a, 4, name="zero")
        one = layers.dense(a, 4, kernel_initializer=initializers.ones_initializer(),
                           bias_initializer=initializers.constant_initializer(0.5), name="one")
        return zero + one

    np.testing.assert_allclose(job(x), np.repeat(x.sum(1, keepdims=True), 4, 1) + 0.5, rtol=1e-6)


def test_dense_on_rank_3_inputs_works_on_the_last_axis() -> None:
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)

    @fc.global_function()
    def job(a: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        return layers.dense(a, 5, kernel_initializer=initializers.ones_initializer(), use_bias=False, name="d")

    got = job(x)
    assert got.shape == (2, 3, 5)
    np.testing.assert_allclose(got, np.repeat(x.sum(-1, keepdims=True), 5, -1), rtol=1e-6)


def test_activation_without_a_name_parameter_is_called_plainly() -> None:
    calls = []

    def square(v: Any) -> Any:
        calls.append(v.lbn)
        return v * v

    @fc.global_function()
    def job(a: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return layers.dense(a, 2, activation=square, kernel_initializer=initializers.ones_initializer(), name="sq")

    np.testing.assert_allclose(job(np.ones((2, 2), np.float32)), np.full((2, 2), 4.0))
    assert calls == ["sq_bias_add/out_0"]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_conv2d_layer_names_shapes_and_values(fmt: str) -> None:
    x = RNG.normal(size=(2, 2, 7, 7) if fmt == "NCHW" else (2, 7, 7, 2)).astype(np.float32)
    lbns: list[str] = []

    @fc.global_function()
    def job(a: tp.Numpy.Placeholder(x.shape)) -> tp.Numpy:
        y = layers.conv2d(a, 4, 3, strides=2, padding="SAME", data_format=fmt, activation=activations.relu,
                          name="conv1", kernel_initializer=initializers.random_uniform_initializer(-1, 1),
                          bias_initializer=initializers.constant_initializer(0.1))
        lbns.append(y.lbn)
        return y

    got = job(x)
    session = fc.get_default_session()
    w = session.variables.get("conv1-weight")
    assert w.shape == ((4, 2, 3, 3) if fmt == "NCHW" else (4, 3, 3, 2))
    assert session.variables.get("conv1-bias").shape == (4,)
    assert lbns == ["conv1-activation/out_0"]
    from flowjob_ops.kernels import window2d as pads

    resolved, _ = pads.resolve_padding("SAME", (7, 7), 3, 2)
    y = loops.conv2d_ref(x, w, (2, 2), resolved, (1, 1), 1, fmt)
    bias = np.full(4, 0.1).reshape((1, 4, 1, 1) if fmt == "NCHW" else (1, 1, 1, 4))
    np.testing.assert_allclose(got, np.maximum(y + bias, 0), rtol=1e-4, atol=1e-5)


def test_conv2d_layer_defaults_and_weight_names() -> None:
    names: list[str] = []

    @fc.global_function()
    def job(a: tp.Numpy.Placeholder((1, 4, 5, 5))) -> tp.Numpy:
        y = layers.conv2d(a, 6, (3, 1), groups=2, weight_name="kernel", bias_name="offset")
        names.append(y.lbn)
        return y

    out = job(np.ones((1, 4, 5, 5), np.float32))
    assert out.shape == (1, 6, 3, 5)
    assert names[0].startswith("Conv2D_") and names[0].endswith("-bias_add/out_0")
    variables = fc.get_default_session().variables
    weight = variables.get("kernel")
    assert weight.shape == (6, 2, 3, 1)
    limit = np.sqrt(6.0 / (2 * 3 * 1 + 6 * 3 * 1))  # xavier uniform, fan_avg of an NCHW weight
    assert 0 < np.abs(weight).max() <= limit
    np.testing.assert_array_equal(variables.get("offset"), np.zeros(6))


@pytest.mark.parametrize("body, pattern", [
    (lambda x: layers.dense(x, 0), r"flow.layers.dense at .*test_layers.py:\d+: units must be a positive int, got 0"),
    (lambda x: layers.conv2d(x, 4, 3, groups=3), r"groups=3 must divide the input channels \(2\) and filters \(4\)"),
    (lambda x: layers.conv2d(x, 4, 0), r"kernel_size must be >= 1"),
    (lambda x: layers.conv2d(x, 4, 9), r"output would be empty"),
    (lambda x: layers.conv2d(x, 4, 3, data_format="NCWH"), r"data_format must be 'NCHW' or 'NHWC'"),
])
def test_layer_errors(body: Any, pattern: str) -> None:
    @fc.global_function()
    def job(x: tp.Numpy.Placeholder((1, 2, 5, 5))) -> tp.Numpy:
        return body(x)

    with pytest.raises(fc.OpBuildError, match=pattern):
        job(np.zeros((1, 2, 5, 5), np.float32))
