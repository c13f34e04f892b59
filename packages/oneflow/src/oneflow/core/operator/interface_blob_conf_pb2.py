"""``oneflow.core.operator.interface_blob_conf_pb2``: legacy's ``InterfaceBlobConf`` (shape, data type,
dynamic) of a job's inputs. ``interface_blob_conf.proto`` beside this file is the documented source."""
from __future__ import annotations

import oneflow.core.common.data_type_pb2  # noqa: F401  (imported by the file: loaded first)
import oneflow.core.common.shape_pb2  # noqa: F401
from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file(
    "oneflow/core/operator/interface_blob_conf.proto", enums=[],
    messages=[message("InterfaceBlobConf", Field("optional", "ShapeProto", "shape", 1),
                      Field("optional", "DataType", "data_type", 2), Field("optional", "bool", "is_dynamic", 3))],
    dependencies=("oneflow/core/common/shape.proto", "oneflow/core/common/data_type.proto")))

DESCRIPTOR = _FILE.DESCRIPTOR
InterfaceBlobConf = _FILE.InterfaceBlobConf

__all__ = ["InterfaceBlobConf"]
