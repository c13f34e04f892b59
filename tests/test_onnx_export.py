"""flow.onnx.export as legacy v0.4 (its test/onnx/util.py: save a checkpoint, export the job with its folder,
run the model with onnxruntime against the job's own outputs). The model always passes onnx.checker; the
comparison with onnxruntime runs where onnxruntime is installed."""
from __future__ import annotations

import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

onnx = pytest.importorskip("onnx", reason="the onnx package (flowjob-ops[onnx]) is not installed")
fresh_session = sibling(__file__, "legacy_helpers").fresh_session
RNG = np.random.default_rng(2804)


def _export(job, tmp_path, **kwargs):
    """Legacy's convert_to_onnx_and_check: init and save the variables, export with that folder."""
    flow.train.CheckPoint().init()
    weights = tmp_path / "weights"
    flow.checkpoint.save(str(weights))
    path = str(tmp_path / "model.onnx")
    flow.onnx.export(job, str(weights), path, **kwargs)
    model = onnx.load(path)
    onnx.checker.check_model(path if kwargs.get("external_data") else model)
    return path, model


def _run(path, feeds):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: the model passed onnx.checker, "
                                                    "but running it against flowjob's outputs needs onnxruntime")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(job, tmp_path, feeds, rtol=1e-5, atol=1e-5, **kwargs):
    path, model = _export(job, tmp_path, **kwargs)
    want = job(*feeds.values())
    (got,) = _run(path, feeds)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return model


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_a_convolutional_network(tmp_path, data_format):
    """conv2d, bias_add, batch norm (inference), relu, both poolings, a flatten and a dense layer."""
    shape = (2, 3, 9, 9) if data_format == "NCHW" else (2, 9, 9, 3)
    channel = 1 if data_format == "NCHW" else 3

    @flow.global_function()
    def cnn(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        y = flow.layers.conv2d(x, 4, 3, padding="SAME", data_format=data_format, activation=flow.nn.relu,
                               kernel_initializer=flow.random_normal_initializer(), name="conv")
        y = flow.layers.batch_normalization(y, axis=channel, training=False, name="bn")
        y = flow.nn.max_pool2d(y, 2, 2, "VALID", data_format=data_format)
        y = flow.nn.avg_pool2d(y, 3, 1, "SAME", data_format=data_format)
        y = flow.reshape(y, (2, -1))
        return flow.layers.dense(y, 5, activation=flow.math.tanh, name="fc",
                                 kernel_initializer=flow.random_normal_initializer())

    model = _check(cnn, tmp_path, {"x": RNG.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-5)
    kinds = {n.op_type for n in model.graph.node}
    assert {"Conv", "MaxPool", "AveragePool", "MatMul", "Relu", "Tanh"} <= kinds
    assert {i.name for i in model.graph.input} == {"x"}


def test_elementwise_matrix_and_shape_ops(tmp_path):
    @flow.global_function()
    def mixed(a: tp.Numpy.Placeholder((4, 6)), b: tp.Numpy.Placeholder((6, 4))) -> tp.Numpy:
        w = flow.get_variable("w", (4, 4), initializer=flow.random_uniform_initializer())
        y = flow.matmul(a, b) + w
        y = flow.matmul(y, w, transpose_b=True) * 0.5 - y / 3.0
        y = flow.math.sigmoid(y) + flow.math.maximum(y, 0.1 * y)
        y = flow.nn.softmax(flow.transpose(y, perm=[1, 0]))
        y = flow.concat([y, flow.math.square(y)], axis=1)
        y = flow.nn.bias_add(y, flow.get_variable("b", (8,), initializer=flow.random_uniform_initializer()))
        return flow.math.reduce_mean(flow.reshape(y, (2, 2, 8)), axis=1) + flow.math.reduce_sum(y)

    _check(mixed, tmp_path, {"a": RNG.standard_normal((4, 6)).astype(np.float32),
                             "b": RNG.standard_normal((6, 4)).astype(np.float32)})


def test_activations_padding_and_gathers(tmp_path):
    @flow.global_function()
    def more(x: tp.Numpy.Placeholder((3, 4)), i: tp.Numpy.Placeholder((5,), dtype=flow.int32)) -> tp.Numpy:
        y = flow.math.gelu(x) + flow.nn.elu(x) + flow.nn.selu(x) + flow.nn.leaky_relu(x, alpha=0.1)
        y = flow.clip_by_value(y, min_value=-1.5, max_value=2.0) + flow.clip_by_value(x, max_value=0.5)
        y = flow.nn.log_softmax(flow.pad(y, paddings=((1, 0), (0, 2)), constant_value=0.25), axis=0)
        return flow.gather(y, i, axis=1)

    _check(more, tmp_path, {"x": RNG.standard_normal((3, 4)).astype(np.float32),
                            "i": np.array([0, 5, 2, 2, 1], np.int32)})


def test_external_data_keeps_the_weights_beside_the_model(tmp_path):
    @flow.global_function()
    def dense(x: tp.Numpy.Placeholder((3, 64))) -> tp.Numpy:
        return flow.layers.dense(x, 32, activation=flow.nn.relu, name="big")

    path, model = _export(dense, tmp_path, external_data=True)
    assert os.path.getsize(path + ".data") >= 64 * 32 * 4  # the kernel's values are there, not in the model
    x = RNG.standard_normal((3, 64)).astype(np.float32)
    (got,) = _run(path, {"x": x})
    np.testing.assert_allclose(got, dense(x), rtol=1e-5, atol=1e-6)


def test_an_op_without_a_mapping_is_refused_by_name(tmp_path):
    @flow.global_function()
    def sorted_job(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.sort(x, name="the_sort")

    with pytest.raises(ValueError, match=r"op 'the_sort' \(sort\) at .* has no ONNX mapping"):
        _export(sorted_job, tmp_path)
    assert not os.path.exists(tmp_path / "model.onnx")


def test_a_variable_missing_from_the_checkpoint_is_named(tmp_path):
    @flow.global_function()
    def first(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="one")

    flow.train.CheckPoint().init()
    flow.checkpoint.save(str(tmp_path / "weights"))

    @flow.global_function()
    def second(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.matmul(x, flow.get_variable("later", (3, 2), initializer=flow.zeros_initializer()))

    with pytest.raises(ValueError, match="variable 'later' is not in the checkpoint"):
        flow.onnx.export(second, str(tmp_path / "weights"), str(tmp_path / "model.onnx"))


def test_legacy_options_that_mean_nothing_here_are_refused(tmp_path):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.relu(x)

    with pytest.raises(ValueError, match="continue_on_error=True"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"), continue_on_error=True)
    with pytest.raises(ValueError, match=r"opset must be an int in \[10"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"), opset=9)


def test_without_the_onnx_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from flowjob_core import MissingPackageError

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.relu(x)

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if it were not installed
    with pytest.raises(MissingPackageError, match=r"pip install 'flowjob-ops\[onnx\]'"):
        flow.onnx.export(job, str(tmp_path), str(tmp_path / "m.onnx"))
