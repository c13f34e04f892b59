"""``oneflow.core.common.shape_pb2``: legacy's ``ShapeProto`` (``shape.proto`` beside it is the source)."""
from __future__ import annotations

from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file("oneflow/core/common/shape.proto", enums=[],
                  messages=[message("ShapeProto", Field("repeated", "int64", "dim", 1))]))

DESCRIPTOR = _FILE.DESCRIPTOR
ShapeProto = _FILE.ShapeProto

__all__ = ["ShapeProto"]
