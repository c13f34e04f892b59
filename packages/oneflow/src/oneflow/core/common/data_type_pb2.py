"""``oneflow.core.common.data_type_pb2``: legacy's ``DataType`` numbers and ``OptInt64``.

``data_type.proto`` beside this file is the documented source; the descriptor is built in code by
``oneflow.core._descriptors``. Legacy programs import it as ``data_type_util`` and read the numbers
(``data_type_util.kFloat`` is 2, ``kInt32`` 5, ``kFloat16`` 9).
"""
from __future__ import annotations

from oneflow.core._descriptors import Field, enum, file, load, message

_FILE = load(file(
    "oneflow/core/common/data_type.proto",
    enums=[enum("DataType", "kInvalidDataType", "kChar", "kFloat", "kDouble", "kInt8", "kInt32", "kInt64",
                "kUInt8", "kOFRecord", "kFloat16", "kTensorBuffer")],
    messages=[message("OptInt64", Field("optional", "int64", "value", 1, default="-1"))],
))

DESCRIPTOR = _FILE.DESCRIPTOR
DataType = _FILE.DataType
OptInt64 = _FILE.OptInt64
kInvalidDataType: int = _FILE.kInvalidDataType
kChar: int = _FILE.kChar
kFloat: int = _FILE.kFloat
kDouble: int = _FILE.kDouble
kInt8: int = _FILE.kInt8
kInt32: int = _FILE.kInt32
kInt64: int = _FILE.kInt64
kUInt8: int = _FILE.kUInt8
kOFRecord: int = _FILE.kOFRecord
kFloat16: int = _FILE.kFloat16
kTensorBuffer: int = _FILE.kTensorBuffer

__all__ = ["DataType", "OptInt64", "kChar", "kDouble", "kFloat", "kFloat16", "kInt32", "kInt64", "kInt8",
           "kInvalidDataType", "kOFRecord", "kTensorBuffer", "kUInt8"]
