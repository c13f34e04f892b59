"""Small models written the way legacy v0.4's test/onnx/models are (AlexNet, ResNet-50, MobileNet-V2), exported
at every opset legacy's tests ask for and checked as legacy's util.convert_to_onnx_and_check checks them: save
the initialized variables, export the job with that folder, run the model with onnxruntime (extended graph
optimizations) on uniform inputs in [-10, 10], and compare with the job's own output (rtol 1e-2, atol 1e-5).

Each model keeps its legacy building blocks (lowercase ``pad="same"`` with a stride, grouped depthwise
convolutions, relu6 as ``clip_by_value``, eval-mode batch norm, residual adds, an NHWC input transposed to
NCHW, a flattened pool into dense layers) at sizes that run in a second."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import oneflow as flow
import oneflow.core.operator.op_conf_pb2 as op_conf_util
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
OPSETS = [None, 10, 11, 13]


def convert_to_onnx_and_check(job_func, tmp_path, opset=None):
    flow.train.CheckPoint().init()
    weights = tmp_path / "weights"
    flow.train.CheckPoint().save(str(weights))
    path = str(tmp_path / "model.onnx")
    flow.onnx.export(job_func, str(weights), path, opset=opset)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    assert len(sess.get_outputs()) == 1 and len(sess.get_inputs()) <= 1
    rng = np.random.default_rng(4)
    feeds = OrderedDict((i.name, rng.uniform(-10, 10, i.shape).astype(np.float32)) for i in sess.get_inputs())
    onnx_res = sess.run([], feeds)[0]
    oneflow_res = job_func(*feeds.values()).get().numpy()
    assert np.allclose(onnx_res, oneflow_res, rtol=1e-2, atol=1e-5)
    return onnx.load(path)


def _conv2d_layer(name, input, filters, kernel_size=3, strides=1, padding="SAME", group_num=1,
                  activation=op_conf_util.kRelu, use_bias=False):
    weight = flow.get_variable(name + "-weight", shape=(filters, input.shape[1] // group_num, kernel_size,
                                                        kernel_size),
                               dtype=input.dtype, initializer=flow.random_uniform_initializer())
    output = flow.nn.conv2d(input, weight, strides, padding, "NCHW", 1, group_num, name=name)
    if use_bias:
        bias = flow.get_variable(name + "-bias", shape=(filters,), dtype=input.dtype,
                                 initializer=flow.random_uniform_initializer(), model_name="bias")
        output = flow.nn.bias_add(output, bias, "NCHW")
    if activation is not None:
        if activation == op_conf_util.kRelu:
            output = flow.nn.relu(output)
        else:
            raise NotImplementedError
    return output


def _batch_norm(inputs, name):
    return flow.layers.batch_normalization(inputs=inputs, axis=1, momentum=0.97, epsilon=1e-3, trainable=False,
                                           training=False, name=name)


def _dense(x, units, name, activation=None):
    return flow.layers.dense(inputs=x, units=units, activation=activation, use_bias=False,
                             kernel_initializer=flow.truncated_normal(0.816496580927726), bias_initializer=False,
                             trainable=False, name=name)


def small_alexnet(images):
    transposed = flow.transpose(images, name="transpose", perm=[0, 3, 1, 2])
    conv1 = _conv2d_layer("conv1", transposed, filters=8, kernel_size=5, strides=2, padding="VALID", use_bias=True)
    pool1 = flow.nn.avg_pool2d(conv1, 3, 2, "VALID", "NCHW", name="pool1")
    conv2 = _conv2d_layer("conv2", pool1, filters=12, kernel_size=3, use_bias=True)
    pool5 = flow.nn.max_pool2d(conv2, 3, 2, "VALID", "NCHW", name="pool5")
    fc1 = _dense(flow.reshape(pool5, [pool5.shape[0], -1]), 32, "fc1", activation=flow.math.relu)
    return _dense(fc1, 11, "fc3")


def small_resnet(images):
    def bottleneck(x, name, inner, filters, stride):
        a = flow.math.relu(_batch_norm(_conv2d_layer(name + "_branch2a", x, inner, 1, stride, activation=None),
                                       name + "_branch2a_bn"))
        b = flow.math.relu(_batch_norm(_conv2d_layer(name + "_branch2b", a, inner, 3, activation=None),
                                       name + "_branch2b_bn"))
        c = _batch_norm(_conv2d_layer(name + "_branch2c", b, filters, 1, activation=None), name + "_branch2c_bn")
        if x.shape[1] != filters or stride != 1:
            x = _batch_norm(_conv2d_layer(name + "_branch1", x, filters, 1, stride, activation=None),
                            name + "_branch1_bn")
        return flow.math.relu(x + c)

    conv1 = _conv2d_layer("conv1", images, 8, 7, 2, activation=None)
    pool1 = flow.nn.max_pool2d(flow.math.relu(_batch_norm(conv1, "conv1_bn")), ksize=3, strides=2,
                               padding="VALID", data_format="NCHW", name="pool1")
    body = bottleneck(pool1, "res2_0", 4, 16, 1)
    body = bottleneck(body, "res2_1", 4, 16, 1)
    body = bottleneck(body, "res3_0", 8, 32, 2)
    pool5 = flow.nn.avg_pool2d(body, ksize=body.shape[2], strides=1, padding="VALID", data_format="NCHW",
                               name="pool5")
    return _dense(flow.reshape(pool5, (pool5.shape[0], -1)), 10, "fc1001")


def small_mobilenet_v2(images):
    def unit(x, filters, kernel, stride, pad, group, prefix, act=True):
        bn = _batch_norm(_conv2d_layer(prefix, x, filters, kernel, stride, pad, group, activation=None),
                         prefix + "-BatchNorm")
        return flow.clip_by_value(bn, 0, 6, name="%s-relu6" % prefix) if act else bn

    def inverted_residual(x, num_in, num_out, stride, prefix):
        expand = unit(x, num_in * 6, 1, 1, "valid", 1, prefix + "-expand")
        depthwise = unit(expand, num_in * 6, 3, stride, "same", num_in * 6, prefix + "-depthwise")
        project = unit(depthwise, num_out, 1, 1, "valid", 1, prefix + "-project", act=False)
        return flow.math.add(x, project) if stride == 1 and num_in == num_out else project

    transposed = flow.transpose(images, perm=[0, 3, 1, 2])
    body = unit(transposed, 8, 3, 2, "same", 1, "conv1")
    body = inverted_residual(body, 8, 8, 1, "block0")
    body = inverted_residual(body, 8, 12, 2, "block1")
    body = unit(body, 24, 1, 1, "valid", 1, "conv_last")
    pool = flow.nn.avg_pool2d(body, ksize=body.shape[2], strides=1, padding="VALID", data_format="NCHW")
    return _dense(flow.flatten(pool, start_dim=1), 10, "fc")


@pytest.mark.parametrize("opset", OPSETS)
def test_alexnet(tmp_path, opset):
    @flow.global_function()
    def alexnet_eval_job(x: tp.Numpy.Placeholder((1, 35, 35, 3))):
        return small_alexnet(x)

    model = convert_to_onnx_and_check(alexnet_eval_job, tmp_path, opset)
    assert {"Transpose", "Conv", "AveragePool", "MaxPool", "MatMul", "Relu"} <= {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("opset", OPSETS)
def test_resnet(tmp_path, opset):
    @flow.global_function()
    def InferenceNet(images: tp.Numpy.Placeholder((1, 3, 32, 32))):
        return small_resnet(images)

    model = convert_to_onnx_and_check(InferenceNet, tmp_path, opset)
    # conv1, three convolutions per bottleneck and the two projection shortcuts
    assert [n.op_type for n in model.graph.node].count("Conv") == 12


@pytest.mark.parametrize("opset", OPSETS)
def test_mobilenetv2(tmp_path, opset):
    @flow.global_function()
    def mobilenetv2(x: tp.Numpy.Placeholder((1, 32, 32, 3))):
        return small_mobilenet_v2(x)

    model = convert_to_onnx_and_check(mobilenetv2, tmp_path, opset)
    groups = [a.i for n in model.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    assert 48 in groups and "Clip" in {n.op_type for n in model.graph.node}
