"""``oneflow.core.operator.op_conf_pb2``: legacy's ``ActivationType`` enum and a saved model's ``OperatorConf``.

Legacy's op_conf.proto held every operator configuration of its graph compiler. Programs use the
activation numbers from it (BERT passes ``op_conf_util.kNone`` to its dense layers, legacy model tests
``kRelu`` / ``kSigmoid``), and a saved model lists its job's ops as ``OperatorConf`` messages; this module
provides those, with the four op members flowjob writes (``input_conf``, ``variable_conf``, ``return_conf``,
``user_conf``). ``op_conf.proto`` beside this file is its documented source; the descriptor is built in
code by ``oneflow.core._descriptors``.
"""
from __future__ import annotations

import oneflow.core.common.data_type_pb2  # noqa: F401  (imported by the file: loaded first)
import oneflow.core.common.shape_pb2  # noqa: F401
import oneflow.core.framework.user_op_conf_pb2  # noqa: F401
import oneflow.core.operator.interface_blob_conf_pb2  # noqa: F401
from oneflow.core._descriptors import Field, enum, file, load, message

_FILE = load(file(
    "oneflow/core/operator/op_conf.proto",
    enums=[enum("ActivationType", "kNone", "kTanH", "kSigmoid", "kRelu")],
    messages=[
        message("InputOpConf", Field("optional", "string", "tick", 1), Field("required", "string", "out", 2),
                Field("required", "InterfaceBlobConf", "blob_conf", 3)),
        message("ReturnOpConf", Field("required", "string", "in", 1), Field("required", "string", "out", 2)),
        message("VariableOpConf", Field("optional", "string", "tick", 1), Field("required", "string", "out", 2),
                Field("required", "ShapeProto", "shape", 3), Field("optional", "DataType", "data_type", 4),
                Field("optional", "string", "model_name", 7, default="weight"),
                Field("optional", "bool", "trainable", 11, default="true")),
        message("OperatorConf", Field("required", "string", "name", 1),
                Field("optional", "string", "device_tag", 4, default="invalid_device"),
                Field("optional", "VariableOpConf", "variable_conf", 122, oneof="op_type"),
                Field("optional", "InputOpConf", "input_conf", 137, oneof="op_type"),
                Field("optional", "ReturnOpConf", "return_conf", 146, oneof="op_type"),
                Field("optional", "UserOpConf", "user_conf", 199, oneof="op_type")),
    ],
    dependencies=("oneflow/core/common/shape.proto", "oneflow/core/common/data_type.proto",
                  "oneflow/core/framework/user_op_conf.proto", "oneflow/core/operator/interface_blob_conf.proto")))

DESCRIPTOR = _FILE.DESCRIPTOR
ActivationType = _FILE.ActivationType
InputOpConf = _FILE.InputOpConf
OperatorConf = _FILE.OperatorConf
ReturnOpConf = _FILE.ReturnOpConf
VariableOpConf = _FILE.VariableOpConf
kNone: int = _FILE.kNone
kTanH: int = _FILE.kTanH
kSigmoid: int = _FILE.kSigmoid
kRelu: int = _FILE.kRelu

__all__ = ["ActivationType", "InputOpConf", "OperatorConf", "ReturnOpConf", "VariableOpConf", "kNone", "kRelu",
           "kSigmoid", "kTanH"]
