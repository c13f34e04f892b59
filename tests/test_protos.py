"""oneflow.core's protobuf modules (data_type_pb2, op_conf_pb2, initializer_conf_pb2, the saved-model files)
match the .proto files shipped beside them, keep legacy's numbers, and an InitializerConf works wherever an
initializer does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2

import oneflow as flow
import oneflow.core.common.data_type_pb2 as data_type_util
import oneflow.core.common.shape_pb2 as shape_util
import oneflow.core.framework.user_op_attr_pb2 as user_op_attr_util
import oneflow.core.framework.user_op_conf_pb2 as user_op_conf_util
import oneflow.core.job.initializer_conf_pb2 as initializer_conf_util
import oneflow.core.job.job_conf_pb2 as job_conf_util
import oneflow.core.operator.interface_blob_conf_pb2 as interface_blob_conf_util
import oneflow.core.operator.op_conf_pb2 as op_conf_util
import oneflow.core.register.logical_blob_id_pb2 as logical_blob_id_util
import oneflow.core.serving.saved_model_pb2 as saved_model_util
import oneflow.typing as tp
from oneflow.core import _descriptors
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value = _helpers.fresh_session, _helpers.value

SRC = Path(flow.__file__).parent.parent  # -I root: protoc names each file by its path below it
MODULES = [data_type_util, op_conf_util, initializer_conf_util, shape_util, logical_blob_id_util,
           interface_blob_conf_util, user_op_attr_util, user_op_conf_util, job_conf_util, saved_model_util]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_descriptor_equals_protoc_output(module, tmp_path: Path) -> None:
    proto = module.DESCRIPTOR.name
    assert (SRC / proto).is_file(), f"{proto} is not shipped beside {module.__name__}"
    out = tmp_path / "out.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}", f"--descriptor_set_out={out}", proto],
                   check=True, cwd=tmp_path)
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    messages = list(compiled.message_type)
    while messages:  # nested ones too (map entries)
        message = messages.pop()
        messages.extend(message.nested_type)
        for field in message.field:
            field.ClearField("json_name")  # protoc fills it in from the field name
    # the proto as built (the pool's own copy re-prints float defaults: 0.05 as 0.0500000007)
    assert compiled == _descriptors.BUILT[proto]


def test_legacy_numbers() -> None:
    assert (op_conf_util.kNone, op_conf_util.kTanH, op_conf_util.kSigmoid, op_conf_util.kRelu) == (0, 1, 2, 3)
    assert op_conf_util.ActivationType.Name(3) == "kRelu"
    assert [data_type_util.DataType.Value(n) for n in ("kFloat", "kDouble", "kInt8", "kInt32", "kInt64",
                                                        "kUInt8", "kFloat16")] == [2, 3, 4, 5, 6, 7, 9]
    assert data_type_util.kTensorBuffer == 10 and data_type_util.OptInt64().value == -1
    assert initializer_conf_util.TruncatedNormalInitializerConf().std == pytest.approx(0.05)
    assert (initializer_conf_util.kFanIn, initializer_conf_util.kAverage, initializer_conf_util.kTruncatedNormal) \
        == (0, 2, 2)
    numbers = {f.name: f.number for f in initializer_conf_util.InitializerConf.DESCRIPTOR.oneofs_by_name["type"].fields}
    assert numbers["constant_conf"] == 1 and numbers["truncated_normal_conf"] == 6 and numbers["empty_conf"] == 12


def test_saved_model_numbers() -> None:
    def numbers(message: object) -> dict[str, int]:
        return {f.name: f.number for f in message.DESCRIPTOR.fields}

    assert numbers(saved_model_util.SavedModel) == {"name": 1, "version": 2, "checkpoint_dir": 3, "graphs": 4,
                                                    "default_graph_name": 5}
    assert numbers(saved_model_util.GraphDef) == {"op_list": 1, "signatures": 2, "default_signature_name": 3}
    ops = numbers(op_conf_util.OperatorConf)
    assert (ops["name"], ops["device_tag"], ops["variable_conf"], ops["input_conf"], ops["return_conf"],
            ops["user_conf"]) == (1, 4, 122, 137, 146, 199)
    assert numbers(job_conf_util.JobSignatureDef) == {"inputs": 1, "outputs": 2}
    assert numbers(user_op_conf_util.UserOpConf) == {"op_type_name": 1, "input": 2, "output": 3, "attr": 4}
    assert numbers(user_op_attr_util.AttrValue)["at_list_string"] == 14
    assert op_conf_util.OperatorConf().device_tag == "invalid_device" and op_conf_util.VariableOpConf().trainable
    # a map field reads and writes as a dict
    model = saved_model_util.SavedModel(name="m", version=1, checkpoint_dir="variables")
    model.graphs["f"].signatures["s"].inputs["x"].lbi.op_name = "Input_0"
    model.graphs["f"].signatures["s"].inputs["x"].blob_conf.data_type = data_type_util.kFloat  # a required field
    again = saved_model_util.SavedModel.FromString(model.SerializeToString())
    assert again.graphs["f"].signatures["s"].inputs["x"].lbi.op_name == "Input_0"


def test_wire_format_of_a_legacy_initializer() -> None:
    conf = initializer_conf_util.InitializerConf()
    conf.constant_conf.value = 1.0
    # InitializerConf field 1 (a 5-byte ConstantInitializerConf): its float field 1 = 1.0 (0x3f800000, little end)
    assert conf.SerializeToString() == b"\x0a\x05\x0d\x00\x00\x80\x3f"


def _conf(member: str, **fields) -> object:
    conf = initializer_conf_util.InitializerConf()
    getattr(conf, member).SetInParent()  # an empty member is still the chosen one
    for key, val in fields.items():
        setattr(getattr(conf, member), key, val)
    return conf


SHAPE = (6, 4, 3, 3)
K = initializer_conf_util
CASES = {
    "constant": (_conf("constant_conf", value=0.5), flow.constant_initializer(0.5)),
    "constant_int": (_conf("constant_int_conf", value=7), flow.constant_initializer(7)),
    "random_uniform": (_conf("random_uniform_conf", min=-2.0, max=3.0), flow.random_uniform_initializer(-2, 3)),
    "random_normal": (_conf("random_normal_conf", mean=1.0, std=0.5), flow.random_normal_initializer(1.0, 0.5)),
    "truncated_normal": (_conf("truncated_normal_conf", std=0.25), flow.truncated_normal_initializer(0, 0.25)),
    "truncated_normal_default": (_conf("truncated_normal_conf"), flow.truncated_normal_initializer(0, 0.05)),
    "xavier": (_conf("xavier_conf", variance_norm=K.kAverage, data_format="channels_first"),
               flow.xavier_uniform_initializer("NCHW")),
    "msra": (_conf("msra_conf", variance_norm=K.kFanIn, data_format="channels_first"),
             flow.variance_scaling_initializer(2.0, "fan_in", "random_normal", "NCHW")),
    "variance_scaling": (_conf("variance_scaling_conf", scale=3.0, variance_norm=K.kFanOut,
                               distribution=K.kTruncatedNormal, data_format="channels_last"),
                         flow.variance_scaling_initializer(3.0, "fan_out", "truncated_normal", "NHWC")),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_conf_gives_the_values_of_the_matching_initializer(case: str) -> None:
    conf, initializer = CASES[case]

    @flow.global_function()
    def declare() -> tp.Numpy:
        a = flow.get_variable("from_conf", shape=SHAPE, initializer=conf, random_seed=3)
        b = flow.get_variable("from_flow", shape=SHAPE, initializer=initializer, random_seed=3)
        return a - b

    np.testing.assert_allclose(declare(), 0.0, atol=1e-6)
    assert value("from_conf").std() > 0 or case.startswith("constant")


def test_the_session_seed_draws_alike_for_conf_and_initializer() -> None:
    # without random_seed each draws from the session's per-variable stream, which depends on the name only
    @flow.global_function()
    def first() -> None:
        flow.get_variable("w", shape=(5, 5), initializer=_conf("random_normal_conf", std=2.0))

    first()
    from_conf = value("w")
    flow.clear_default_session()

    @flow.global_function()
    def second() -> None:
        flow.get_variable("w", shape=(5, 5), initializer=flow.random_normal_initializer(0.0, 2.0))

    second()
    np.testing.assert_array_equal(from_conf, value("w"))


def test_range_confs_count_along_an_axis() -> None:
    @flow.global_function()
    def declare() -> None:
        flow.get_variable("r", shape=(2, 3), initializer=_conf("range_conf", start=1.5, stride=0.5, axis=1))
        flow.get_variable("ri", shape=(3, 2), dtype=flow.int64, initializer=_conf("int_range_conf", start=4, axis=0))
        flow.get_variable("rd", shape=(2, 4), initializer=_conf("range_conf"))  # start 0, stride 1, last axis

    declare()
    np.testing.assert_array_equal(value("r"), [[1.5, 2.0, 2.5]] * 2)
    np.testing.assert_array_equal(value("ri"), [[4, 4], [5, 5], [6, 6]])
    assert value("ri").dtype == np.int64
    np.testing.assert_array_equal(value("rd"), [[0, 1, 2, 3]] * 2)


def test_empty_conf_and_empty_initializer_start_at_zeros_and_load() -> None:
    @flow.global_function()
    def declare() -> tp.Numpy:
        return (flow.get_variable("e", shape=(3,), initializer=_conf("empty_conf"))
                + flow.get_variable("f", shape=(3,), initializer=flow.empty_initializer(flow.float)))

    np.testing.assert_array_equal(declare(), np.zeros(3, np.float32))
    flow.load_variables({"e": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(value("e"), [0, 1, 2])
    np.testing.assert_array_equal(value("f"), [0, 0, 0])


def test_layers_take_confs_as_kernel_and_bias_initializers() -> None:
    kernel = _conf("truncated_normal_conf", std=0.02)
    bias = _conf("constant_conf", value=0.25)

    @flow.global_function()
    def dense(x: tp.Numpy.Placeholder((2, 8))) -> tp.Numpy:
        with flow.scope.namespace("cls"):
            return flow.layers.dense(x, 4, activation=None, kernel_initializer=kernel, bias_initializer=bias,
                                     name="d")

    out = dense(np.zeros((2, 8), np.float32))
    np.testing.assert_allclose(out, 0.25)
    weight = value("cls-d-weight")
    assert weight.shape == (4, 8) and 0 < np.abs(weight).max() <= 0.04 + 1e-7


def test_a_conf_with_no_member_names_the_variable_and_the_session_goes_on() -> None:
    @flow.global_function()
    def bad() -> None:
        flow.get_variable("unset_w", shape=(2,), initializer=initializer_conf_util.InitializerConf())

    with pytest.raises(FlowjobError, match=r"unset_w.*sets none of its initializers"):
        bad()

    @flow.global_function()
    def wrong_norm() -> None:
        flow.get_variable("norm_w", shape=(2, 2), initializer=_conf("xavier_conf", variance_norm=2,
                                                                     data_format="bad_format"))

    with pytest.raises((FlowjobError, ValueError), match="data_format"):
        wrong_norm()

    @flow.global_function()
    def not_a_conf() -> None:
        flow.get_variable("odd_w", shape=(2,), initializer=initializer_conf_util.ConstantInitializerConf(value=1.0))

    with pytest.raises(FlowjobError, match=r"odd_w.*ConstantInitializerConf message is not an initializer"):
        not_a_conf()

    @flow.global_function()
    def fine() -> tp.Numpy:
        return flow.get_variable("ok", shape=(2,), initializer=_conf("constant_conf", value=2.0))

    np.testing.assert_array_equal(fine(), [2.0, 2.0])


def test_decode_random_draws_from_a_conf_like_from_the_matching_initializer() -> None:
    conf = _conf("random_uniform_conf", min=2.0, max=3.0)

    @flow.global_function()
    def draw() -> tp.Numpy:
        return flow.data.decode_random(shape=(4, 5), dtype=flow.float, batch_size=3, initializer=conf)

    batch = draw()
    assert batch.shape == (3, 4, 5) and batch.min() >= 2.0 and batch.max() < 3.0 and batch.std() > 0

    @flow.global_function()
    def unset() -> tp.Numpy:
        return flow.data.decode_random(shape=(2,), dtype=flow.float, initializer=K.InitializerConf())

    with pytest.raises(FlowjobError, match=r"decode_random.*sets none of its initializers"):
        unset()
