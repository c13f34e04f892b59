"""``oneflow.core.register.logical_blob_id_pb2``: legacy's ``LogicalBlobId`` (``op_name`` / ``blob_name``).

``logical_blob_id.proto`` beside this file is the documented source."""
from __future__ import annotations

from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file("oneflow/core/register/logical_blob_id.proto", enums=[],
                  messages=[message("LogicalBlobId", Field("optional", "string", "op_name", 1),
                                    Field("optional", "string", "blob_name", 2))]))

DESCRIPTOR = _FILE.DESCRIPTOR
LogicalBlobId = _FILE.LogicalBlobId

__all__ = ["LogicalBlobId"]
