"""``oneflow.core.serving.saved_model_pb2``: legacy's ``SavedModel`` and ``GraphDef`` messages.

``flow.saved_model.ModelBuilder`` writes a ``SavedModel`` and ``flow.serving.InferenceSession`` reads it;
legacy programs also read the ``.prototxt`` with ``text_format`` and hand a graph's ``op_list`` and
signature to the session themselves. ``saved_model.proto`` beside this file is the documented source.
"""
from __future__ import annotations

import oneflow.core.job.job_conf_pb2  # noqa: F401  (imported by the file: loaded first)
import oneflow.core.operator.op_conf_pb2  # noqa: F401
from oneflow.core._descriptors import Field, file, load, message

_FILE = load(file(
    "oneflow/core/serving/saved_model.proto", enums=[],
    messages=[
        message("SavedModel", Field("required", "string", "name", 1), Field("required", "int64", "version", 2),
                Field("required", "string", "checkpoint_dir", 3), Field("map", "GraphDef", "graphs", 4),
                Field("optional", "string", "default_graph_name", 5)),
        message("GraphDef", Field("repeated", "OperatorConf", "op_list", 1),
                Field("map", "JobSignatureDef", "signatures", 2),
                Field("optional", "string", "default_signature_name", 3)),
    ],
    dependencies=("oneflow/core/operator/op_conf.proto", "oneflow/core/job/job_conf.proto")))

DESCRIPTOR = _FILE.DESCRIPTOR
GraphDef = _FILE.GraphDef
SavedModel = _FILE.SavedModel

__all__ = ["GraphDef", "SavedModel"]
