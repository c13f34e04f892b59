"""``oneflow.core.job.job_conf_pb2``: legacy's job signature messages (``JobSignatureDef``, ``JobInputDef``,
``JobOutputDef``), which a saved model's graphs carry. ``job_conf.proto`` beside this file is the source."""
from __future__ import annotations

import oneflow.core.operator.interface_blob_conf_pb2  # noqa: F401  (imported by the file: loaded first)
import oneflow.core.register.logical_blob_id_pb2  # noqa: F401
from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file(
    "oneflow/core/job/job_conf.proto", enums=[],
    messages=[
        message("JobInputDef", Field("required", "LogicalBlobId", "lbi", 1),
                Field("required", "InterfaceBlobConf", "blob_conf", 2)),
        message("JobOutputDef", Field("required", "LogicalBlobId", "lbi", 1)),
        message("JobSignatureDef", Field("map", "JobInputDef", "inputs", 1),
                Field("map", "JobOutputDef", "outputs", 2)),
    ],
    dependencies=("oneflow/core/register/logical_blob_id.proto", "oneflow/core/operator/interface_blob_conf.proto")))

DESCRIPTOR = _FILE.DESCRIPTOR
JobInputDef = _FILE.JobInputDef
JobOutputDef = _FILE.JobOutputDef
JobSignatureDef = _FILE.JobSignatureDef

__all__ = ["JobInputDef", "JobOutputDef", "JobSignatureDef"]
