"""``oneflow.core.framework.user_op_conf_pb2``: legacy's ``UserOpConf`` (op type, inputs, outputs, attributes).

``user_op_conf.proto`` beside this file is the documented source."""
from __future__ import annotations

import oneflow.core.framework.user_op_attr_pb2  # noqa: F401  (imported by the file: loaded first)
from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file(
    "oneflow/core/framework/user_op_conf.proto", enums=[],
    messages=[message("UserOpConf", Field("required", "string", "op_type_name", 1),
                      Field("map", "UserOpConf.ListString", "input", 2),
                      Field("map", "UserOpConf.ListString", "output", 3), Field("map", "AttrValue", "attr", 4),
                      nested=(message("ListString", Field("repeated", "string", "s", 1)),))],
    dependencies=("oneflow/core/framework/user_op_attr.proto",)))

DESCRIPTOR = _FILE.DESCRIPTOR
UserOpConf = _FILE.UserOpConf

__all__ = ["UserOpConf"]
