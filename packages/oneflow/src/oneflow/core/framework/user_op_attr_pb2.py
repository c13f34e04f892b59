"""``oneflow.core.framework.user_op_attr_pb2``: legacy's ``AttrValue`` (one attribute of a user op).

``user_op_attr.proto`` beside this file is the documented source."""
from __future__ import annotations

import oneflow.core.common.data_type_pb2  # noqa: F401  (imported by the file: loaded first)
import oneflow.core.common.shape_pb2  # noqa: F401
from oneflow.core._descriptors import Field, file, load, message

_LISTS = (("ListInt32", "int32"), ("ListInt64", "int64"), ("ListFloat", "float"), ("ListDataType", "DataType"),
          ("ListShape", "ShapeProto"), ("ListString", "string"))
_VALUES = (("at_int32", "int32"), ("at_int64", "int64"), ("at_bool", "bool"), ("at_float", "float"),
           ("at_double", "double"), ("at_string", "string"), ("at_shape", "ShapeProto"), ("at_data_type", "DataType"),
           ("at_list_int32", "AttrValue.ListInt32"), ("at_list_int64", "AttrValue.ListInt64"),
           ("at_list_float", "AttrValue.ListFloat"), ("at_list_data_type", "AttrValue.ListDataType"),
           ("at_list_shape", "AttrValue.ListShape"), ("at_list_string", "AttrValue.ListString"))

_FILE = load(file(
    "oneflow/core/framework/user_op_attr.proto", enums=[],
    messages=[message("AttrValue",
                      *(Field("optional", kind, name, number, oneof="value")
                        for number, (name, kind) in enumerate(_VALUES, 1)),
                      nested=tuple(message(name, Field("repeated", kind, "val", 1)) for name, kind in _LISTS))],
    dependencies=("oneflow/core/common/shape.proto", "oneflow/core/common/data_type.proto")))

DESCRIPTOR = _FILE.DESCRIPTOR
AttrValue = _FILE.AttrValue

__all__ = ["AttrValue"]
