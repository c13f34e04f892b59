"""``flow.saved_model``: export predict jobs and their variables as legacy's saved model.

``ModelBuilder(path).ModelName(name).Version(n).AddFunction(job).AddSignature(sig).Input(..).Output(..)``
then ``Save()`` writes ``<path>/<n>/``: ``saved_model.pb`` and ``saved_model.prototxt`` (a
``oneflow.core.serving.saved_model_pb2.SavedModel``: each job function's traced op list and its
signatures) and ``variables/``, a checkpoint of the session's variables in the layout
``flow.checkpoint.save`` writes. The version folder is written beside, as a hidden folder, and renamed
into place once complete; an existing version is never replaced. ``flow.serving.InferenceSession``
loads it back.
"""
from __future__ import annotations

import os
from typing import Any, Self

from flowjob_core import JobFunction, SavedModelError, get_default_session
from flowjob_core.checkpoint import atomic_replace as checkpoint_files
from flowjob_core.checkpoint import save_load as checkpoint
from google.protobuf import text_format

from oneflow import _op_list
from oneflow.core.job.job_conf_pb2 import JobSignatureDef
from oneflow.core.serving.saved_model_pb2 import GraphDef, SavedModel

__all__ = ["GraphBuilder", "ModelBuilder", "SignatureBuilder"]


class ModelBuilder:
    """A saved model being described: its name, version and graphs (one per job function)."""

    DEFAULT_CHECKPOINT_DIR = "variables"
    DEFAULT_SAVED_MODEL_FILE_BASENAME = "saved_model"

    def __init__(self, save_path: str | os.PathLike[str]) -> None:
        if not isinstance(save_path, (str, os.PathLike)):
            raise SavedModelError(f"ModelBuilder: save_path must be a path, got {save_path!r}")
        self.version_: int | None = None
        self.checkpoint_dir_ = self.DEFAULT_CHECKPOINT_DIR
        self.saved_model_dir_ = os.fspath(save_path)
        self.saved_model_pb_filename_ = f"{self.DEFAULT_SAVED_MODEL_FILE_BASENAME}.pb"
        self.saved_model_pbtxt_filename_ = f"{self.DEFAULT_SAVED_MODEL_FILE_BASENAME}.prototxt"
        self.saved_model_proto_ = SavedModel()
        self.graph_builders_: dict[str, GraphBuilder] = {}

    @property
    def proto(self) -> Any:
        return self.saved_model_proto_

    @property
    def name(self) -> str:
        return str(self.proto.name)

    def ModelName(self, model_name: str) -> "ModelBuilder":  # noqa: N802 (legacy's names)
        if not isinstance(model_name, str):
            raise SavedModelError(f"ModelBuilder.ModelName: expected a str, got {model_name!r}")
        self.proto.name = model_name
        return self

    def Version(self, version: int) -> "ModelBuilder":  # noqa: N802
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise SavedModelError(f"ModelBuilder.Version: expected an int >= 0, got {version!r}")
        self.version_ = version
        return self

    def AddFunction(self, func: JobFunction) -> "GraphBuilder":  # noqa: N802
        """A graph of this model for the job function ``func`` (the first one added is the default)."""
        if not isinstance(func, JobFunction):
            raise SavedModelError(f"ModelBuilder.AddFunction: expected a @flow.global_function job, got {func!r}")
        if func.name in self.graph_builders_:
            raise SavedModelError(f"ModelBuilder.AddFunction: a function named {func.name!r} is already added")
        builder = GraphBuilder(func.name, self, function=func)
        self.graph_builders_[func.name] = builder
        if not self.proto.HasField("default_graph_name"):
            self.proto.default_graph_name = func.name
        return builder

    def _check_input_output_name_conflict(self) -> None:
        # as legacy: every input and output name, and the blob it names, at most once in the whole model
        names: set[str] = set()
        lbns: set[str] = set()
        for graph_def in self.proto.graphs.values():
            for signature in graph_def.signatures.values():
                for name, item in [*signature.inputs.items(), *signature.outputs.items()]:
                    lbn = f"{item.lbi.op_name}/{item.lbi.blob_name}"
                    if name in names:
                        raise SavedModelError(f"saved model {self.proto.name!r}: the name {name!r} is used twice")
                    if lbn in lbns:
                        raise SavedModelError(f"saved model {self.proto.name!r}: {lbn!r} is bound to two names")
                    names.add(name)
                    lbns.add(lbn)

    def Save(self, save_model_before_graph_complete: bool = True) -> None:  # noqa: N802
        """Write ``<path>/<version>/`` (refused when that version exists)."""
        if not save_model_before_graph_complete:
            raise SavedModelError("ModelBuilder.Save(save_model_before_graph_complete=False): flowjob saves each job "
                                  "as traced and runs its passes again when the model is loaded")
        if self.version_ is None:
            raise SavedModelError(f"saved model {self.proto.name!r}: the version is not set (call .Version(n))")
        if not self.graph_builders_:
            raise SavedModelError(f"saved model {self.proto.name!r}: no function added (call .AddFunction(job))")
        self._check_input_output_name_conflict()
        sessions = {builder.function().session for builder in self.graph_builders_.values()}
        if len(sessions) != 1:
            raise SavedModelError(f"saved model {self.proto.name!r}: its functions belong to different sessions")
        for builder in self.graph_builders_.values():
            if not builder.finished:
                builder.Finish()
            del builder.proto.op_list[:]
            builder.proto.op_list.extend(_op_list.to_op_list(builder.function().ensure_traced()))
        self.proto.version = self.version_
        self.proto.checkpoint_dir = self.checkpoint_dir_
        self._write(sessions.pop())

    def _write(self, session: Any) -> None:
        version_dir = os.path.join(self.saved_model_dir_, str(self.version_))
        if os.path.lexists(version_dir):
            raise SavedModelError(f"saved model {self.proto.name!r}: version {self.version_} exists already "
                                  f"({version_dir}); choose another version or remove it")
        os.makedirs(self.saved_model_dir_, exist_ok=True)
        group = checkpoint_files.begin(version_dir)
        tmp = group.path("tmp")
        try:
            checkpoint.save(os.path.join(tmp, self.checkpoint_dir_), session)
            _write_file(os.path.join(tmp, self.saved_model_pb_filename_), self.proto.SerializeToString())
            _write_file(os.path.join(tmp, self.saved_model_pbtxt_filename_),
                        text_format.MessageToString(self.proto).encode())
            checkpoint_files.fsync_dir(tmp)
            if os.path.lexists(version_dir):  # made meanwhile by another writer: never replaced
                raise SavedModelError(f"saved model {self.proto.name!r}: version {self.version_} appeared while "
                                      f"it was written ({version_dir}); nothing was replaced")
            os.rename(tmp, version_dir)
            checkpoint_files.fsync_dir(self.saved_model_dir_)
        finally:
            checkpoint_files.finish(group)


class _Part:
    """A named part of a saved model (a graph, a signature): its message is an entry of its owner's table
    (``owner.proto.<table>[name]``), or a message of its own without an owner."""

    def __init__(self, name: str, owner: Any, owner_type: type[Any], table: str, message: Any, default: str) -> None:
        kind = type(self).__name__
        if not isinstance(name, str):
            raise SavedModelError(f"{kind}: name must be a str, got {name!r}")
        if owner is not None and not isinstance(owner, owner_type):
            raise SavedModelError(f"{kind}: its owner must be a {owner_type.__name__} or None, got {owner!r}")
        if owner is not None:
            entries = getattr(owner.proto, table)
            if name in entries:
                raise SavedModelError(f"{kind}: {name!r} already exists in {owner_type.__name__} {owner.name!r}")
            self.proto_ = entries[name]
        else:
            self.proto_ = message()
        self.owner_: Any = owner
        self.name_ = name
        self._default = default  # the owner's field naming its default part

    @property
    def name(self) -> str:
        return self.name_

    @property
    def proto(self) -> Any:
        return self.proto_

    def AsDefault(self) -> Self:  # noqa: N802 (legacy's names)
        """Make this its owner's default (graph of the model, signature of the graph)."""
        if self.owner_ is not None:
            setattr(self.owner_.proto, self._default, self.name)
        return self


class GraphBuilder(_Part):
    """One graph of a saved model: a job function's op list and its signatures."""

    def __init__(self, name: str, model_builder: ModelBuilder | None = None, *,
                 function: JobFunction | None = None) -> None:
        super().__init__(name, model_builder, ModelBuilder, "graphs", GraphDef, "default_graph_name")
        self.finished_ = False
        self.signature_builders_: dict[str, SignatureBuilder] = {}
        self._function = function

    @property
    def finished(self) -> bool:
        return self.finished_

    def function(self) -> JobFunction:
        """The job function of this graph: the one added, else the default session's of this name."""
        if self._function is None:
            found = get_default_session().functions.get(self.name)
            if found is None:
                raise SavedModelError(f"graph {self.name!r}: no global function of that name is defined")
            self._function = found
        return self._function

    def AddSignature(self, signature_name: str) -> "SignatureBuilder":  # noqa: N802
        """A signature of this graph (the first one added is the default)."""
        if not isinstance(signature_name, str):
            raise SavedModelError(f"graph {self.name!r}: a signature name must be a str, got {signature_name!r}")
        if signature_name in self.signature_builders_:
            raise SavedModelError(f"graph {self.name!r}: signature {signature_name!r} already exists")
        builder = SignatureBuilder(signature_name, self)
        self.signature_builders_[signature_name] = builder
        if not self.proto.HasField("default_signature_name"):
            self.proto.default_signature_name = signature_name
        return builder

    def Finish(self) -> "GraphBuilder":  # noqa: N802
        """Check every signature's blobs against the traced job and record the inputs' shapes and dtypes."""
        if self.finished:
            raise SavedModelError(f"graph {self.name!r} is finished already")
        job = self.function().ensure_traced()
        inputs = {p.lbn for p in job.placeholders}
        for signature_name, signature in self.proto.signatures.items():
            where = f"graph {self.name!r}, signature {signature_name!r}"
            for name, item in signature.inputs.items():
                lbn = f"{item.lbi.op_name}/{item.lbi.blob_name}"
                if lbn not in inputs:
                    raise SavedModelError(f"{where}, input {name!r}: {lbn!r} is not an input of job {job.name!r}; "
                                          f"its inputs are {sorted(inputs)}")
                spec = job.specs[lbn]
                del item.blob_conf.shape.dim[:]
                item.blob_conf.shape.dim.extend(spec.shape)
                item.blob_conf.data_type = _op_list.data_type(spec.dtype, f"{where}, input {name!r}")
                item.blob_conf.is_dynamic = False
            for name, item in signature.outputs.items():
                lbn = f"{item.lbi.op_name}/{item.lbi.blob_name}"
                if lbn not in job.specs:
                    raise SavedModelError(f"{where}, output {name!r}: job {job.name!r} has no value {lbn!r}")
        self.finished_ = True
        return self

    def OwnerModelBuilder(self) -> ModelBuilder | None:  # noqa: N802
        return self.owner_


class SignatureBuilder(_Part):
    """A signature: names for a graph's inputs (its placeholders' blobs) and outputs (any of its values)."""

    def __init__(self, name: str, graph_builder: GraphBuilder | None = None) -> None:
        super().__init__(name, graph_builder, GraphBuilder, "signatures", JobSignatureDef, "default_signature_name")

    def _where(self) -> str:
        graph = f" of graph {self.owner_.name!r}" if self.owner_ is not None else ""
        return f"signature {self.name!r}{graph}"

    def Input(self, input_name: str, lbn: str) -> "SignatureBuilder":  # noqa: N802
        """Name the job input whose blob is ``lbn`` (``blob.logical_blob_name`` in the job's body)."""
        return self._bind(self.proto.inputs, "input", input_name, lbn)

    def Output(self, output_name: str, lbn: str) -> "SignatureBuilder":  # noqa: N802
        """Name the value ``lbn`` of the job as an output."""
        return self._bind(self.proto.outputs, "output", output_name, lbn)

    def _bind(self, table: Any, kind: str, name: str, lbn: str) -> "SignatureBuilder":
        if not isinstance(name, str) or not isinstance(lbn, str):
            raise SavedModelError(f"{self._where()}: {kind} name and blob name must be str, got {name!r}, {lbn!r}")
        if name in table:
            raise SavedModelError(f"{self._where()}: {kind} {name!r} already exists")
        op_name, blob_name = _op_list.split_lbn(lbn, f"{self._where()}, {kind} {name!r}")
        entry = table[name]
        entry.lbi.op_name = op_name
        entry.lbi.blob_name = blob_name
        return self

    def OwnerGraphBuilder(self) -> GraphBuilder | None:  # noqa: N802
        return self.owner_


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
