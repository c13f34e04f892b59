"""``flow.serving``: load a saved model (``flow.saved_model``) and run its jobs by name.

::

    sess = flow.serving.InferenceSession()
    sess.load_saved_model("models")          # the latest version, its default graph and signature
    sess.launch()                            # rebuild the job, plan it, load the variables
    (probs,) = sess.run("predict", image=batch)
    sess.close()

Each ``InferenceSession`` owns a flowjob session of its own: its jobs and variables are apart from the
default session's and ``close()`` ends only them. A job is rebuilt from its saved op list
(``oneflow._op_list``): the ops are traced again, so each op's shape inference runs for the inputs'
shapes (``batch_size`` changes the first axis), then the usual passes and planner run. Inputs and outputs
take the names of the chosen signature, else of the job's input and return ops (``Input_0``,
``Return_3``, as legacy named them).
"""
from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import os
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Iterator, TextIO

import numpy as np
from flowjob_core import BlobSpec, JobFunction, SavedModelError, Session, current_builder
from flowjob_core.checkpoint import save_load as checkpoint
from flowjob_core.config.function_config import SessionConfig
from flowjob_typing import Numpy

from oneflow import _op_list, _saved_model_files
from oneflow.core.job.job_conf_pb2 import JobSignatureDef

__all__ = ["InferenceSession", "ModelVersionPolicy", "SessionOption"]


class ModelVersionPolicy(enum.Enum):
    """Which version ``InferenceSession.load_saved_model`` loads when not given a number."""

    LATEST = 1  # the highest numbered version folder


class SessionOption:
    """How an ``InferenceSession`` runs: ``device_tag`` ("gpu" or "cpu"; "gpu" runs on the host where no
    gpu backend is installed, as ``flow.config.gpu_device_num`` does), ``device_num`` and
    ``is_mirrored_view`` (kept; one device sees no difference)."""

    def __init__(self) -> None:
        self.device_tag = "gpu"
        self.device_num = 1
        self.is_mirrored_view = False


@dataclass
class _Job:
    """A job of the session: what ``open``/``compile`` gave, then (``launch``) its rebuilt function."""

    name: str
    signature: Any = None
    batch_size: int | None = None
    graph: _op_list.SavedGraph | None = None
    signature_names: tuple[str, ...] = ()
    inputs: list[tuple[str, str, BlobSpec]] = field(default_factory=list)  # (name, saved lbn, spec)
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (name, lbn)
    function: JobFunction | None = None


class InferenceSession:
    """Legacy's serving session: ``load_saved_model`` (or ``open`` + ``compile``), ``launch``, ``run``."""

    class SessionStatus(enum.Enum):
        OPEN = 1
        RUNNING = 2
        CLOSED = 3

    def __init__(self, option: SessionOption | None = None) -> None:
        if option is not None and not isinstance(option, SessionOption):
            raise SavedModelError(f"InferenceSession: option must be a flow.serving.SessionOption, got {option!r}")
        self.option_ = option if option is not None else SessionOption()
        self.is_mirrored_ = self.option_.is_mirrored_view
        self.checkpoint_path_: str | None = None
        self.cur_job_name_: str | None = None
        self._jobs: dict[str, _Job] = {}
        self._session = Session(config=_session_config(self.option_))
        self.status_ = self.SessionStatus.OPEN

    def __del__(self) -> None:
        if getattr(self, "status_", self.SessionStatus.CLOSED) is not self.SessionStatus.CLOSED:
            with contextlib.suppress(Exception):  # a finalizer must not raise; close() reports errors
                self._session.close()

    def _check_status(self, *allowed: "InferenceSession.SessionStatus") -> None:
        if self.status_ not in allowed:
            caller = inspect.stack()[1].function
            raise SavedModelError(f"InferenceSession.{caller} is allowed when the session is "
                                  f"{' or '.join(s.name for s in allowed)}; it is {self.status_.name}"
                                  + (" (call launch() first)" if self.status_ is self.SessionStatus.OPEN else ""))

    # building -------------------------------------------------------------
    def set_checkpoint_path(self, checkpoint_path: str | os.PathLike[str]) -> None:
        self._check_status(self.SessionStatus.OPEN)
        self.checkpoint_path_ = os.fspath(checkpoint_path)

    def _job(self, job_name: str) -> _Job:
        return self._jobs.setdefault(job_name, _Job(job_name))

    def set_job_signature(self, job_name: str, signature: Any) -> None:
        self._check_status(self.SessionStatus.OPEN)
        if not isinstance(signature, JobSignatureDef):
            raise SavedModelError(f"job {job_name!r}: a signature is a JobSignatureDef, got {type(signature).__name__}")
        self._job(job_name).signature = signature

    def set_job_batch_size(self, job_name: str, batch_size: int) -> None:
        """Run job ``job_name`` on inputs with ``batch_size`` rows (the first axis of every input)."""
        self._check_status(self.SessionStatus.OPEN)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SavedModelError(f"job {job_name!r}: batch_size must be an int >= 1, got {batch_size!r}")
        self._job(job_name).batch_size = batch_size

    @contextlib.contextmanager
    def open(self, job_name: str, signature: Any = None, batch_size: int | None = None
             ) -> Iterator["InferenceSession"]:
        """The scope in which ``compile(op_list)`` gives job ``job_name`` its ops."""
        self._check_status(self.SessionStatus.OPEN)
        if self.cur_job_name_ is not None:
            raise SavedModelError(f"InferenceSession.open({job_name!r}): job {self.cur_job_name_!r} is still open")
        self._job(job_name)
        if signature is not None:
            self.set_job_signature(job_name, signature)
        if batch_size is not None:
            self.set_job_batch_size(job_name, batch_size)
        self.cur_job_name_ = job_name
        try:
            yield self
        finally:
            self.cur_job_name_ = None

    def compile(self, op_list: Any) -> None:
        """Give the open job its ops (a saved graph's ``op_list``)."""
        self._check_status(self.SessionStatus.OPEN)
        if self.cur_job_name_ is None:
            raise SavedModelError("InferenceSession.compile: no job is open (use `with sess.open(job_name):`)")
        self._jobs[self.cur_job_name_].graph = _op_list.SavedGraph.read(self.cur_job_name_, op_list)

    def load_saved_model(self, saved_model_dir: str | os.PathLike[str],
                         model_version: Any = ModelVersionPolicy.LATEST,
                         saved_model_meta_file_basename: str = "saved_model", graph_name: str | None = None,
                         signature_name: str | None = None) -> None:
        """Take a graph of the saved model in ``saved_model_dir`` (default: the model's default graph with its
        default signature) and its variables' folder."""
        self._check_status(self.SessionStatus.OPEN)
        if model_version is ModelVersionPolicy.LATEST:
            model_version = None
        elif isinstance(model_version, bool) or not isinstance(model_version, int):
            raise SavedModelError(f"model_version must be an int or flow.serving.ModelVersionPolicy.LATEST, "
                                  f"got {model_version!r}")
        path = _saved_model_files.version_dir(os.fspath(saved_model_dir), model_version)
        proto = _saved_model_files.read(path, saved_model_meta_file_basename)
        if graph_name is None:
            graph_name = proto.default_graph_name
        if graph_name not in proto.graphs:
            raise SavedModelError(f"saved model {path!r} has no graph {graph_name!r}; its graphs: "
                                  f"{sorted(proto.graphs)}")
        graph_def = proto.graphs[graph_name]
        if signature_name is None and graph_def.HasField("default_signature_name"):
            signature_name = graph_def.default_signature_name
        signature = None
        if signature_name is not None:
            if signature_name not in graph_def.signatures:
                raise SavedModelError(f"graph {graph_name!r} of saved model {path!r} has no signature "
                                      f"{signature_name!r}; its signatures: {sorted(graph_def.signatures)}")
            signature = graph_def.signatures[signature_name]
        variables = os.path.join(path, proto.checkpoint_dir)
        if not os.path.isdir(variables):
            raise SavedModelError(f"saved model {path!r}: its variables folder {variables!r} does not exist")
        self.set_checkpoint_path(variables)
        with self.open(graph_name, signature):
            self.compile(graph_def.op_list)
        self._jobs[graph_name].signature_names = tuple(sorted(graph_def.signatures))

    def launch(self) -> None:
        """Rebuild and plan every compiled job, then load the variables from the checkpoint."""
        self._check_status(self.SessionStatus.OPEN)
        if self.checkpoint_path_ is None:
            raise SavedModelError("InferenceSession.launch: the checkpoint path is not set (load_saved_model or "
                                  "set_checkpoint_path)")
        jobs = [job for job in self._jobs.values() if job.graph is not None]
        if not jobs:
            raise SavedModelError("InferenceSession.launch: no job is compiled (load_saved_model, or open + compile)")
        for job in jobs:
            _interface(job)
            job.function = _served_function(self._session, job)
            job.function.plan()
        checkpoint.load(self.checkpoint_path_, self._session, strict=True)
        self.status_ = self.SessionStatus.RUNNING

    # asking ---------------------------------------------------------------
    def print_job_set(self, file: TextIO | None = None) -> None:
        """Write each job's name and its ops' names (to standard output)."""
        self._check_status(self.SessionStatus.OPEN, self.SessionStatus.RUNNING)
        out = file if file is not None else sys.stdout
        for job in self._jobs.values():
            out.write(f"job_name: {job.name}\n")
            for conf in job.graph.ops if job.graph is not None else ():
                out.write(f"\top_name: {conf.name}\n")

    def list_jobs(self) -> list[str]:
        self._check_status(self.SessionStatus.RUNNING)
        return [job.name for job in self._jobs.values() if job.function is not None]

    def list_signatures(self, job_name: str | None = None) -> list[str]:
        """The signatures the saved graph of ``job_name`` (default: the only job) declares."""
        self._check_status(self.SessionStatus.OPEN, self.SessionStatus.RUNNING)
        return list(self._named_job(job_name).signature_names)

    def list_inputs(self, job_name: str | None = None) -> tuple[str, ...]:
        """The input names of ``job_name`` (default: of every job), in the order of its inputs."""
        self._check_status(self.SessionStatus.RUNNING)
        jobs = [self._named_job(job_name)] if job_name is not None else self._running()
        return tuple(dict.fromkeys(name for job in jobs for name, _, _ in job.inputs))

    def list_outputs(self, job_name: str | None = None) -> tuple[str, ...]:
        """The output names of ``job_name`` (default: of every job), in the order ``run`` returns them."""
        self._check_status(self.SessionStatus.RUNNING)
        jobs = [self._named_job(job_name)] if job_name is not None else self._running()
        return tuple(dict.fromkeys(name for job in jobs for name, _ in job.outputs))

    def input_info(self, input_name: str, job_name: str | None = None) -> dict[str, Any]:
        """``{"shape": ..., "dtype": ...}`` of an input."""
        self._check_status(self.SessionStatus.RUNNING)
        job = self._job_with(job_name, input_name, "input")
        spec = next(spec for name, _, spec in job.inputs if name == input_name)
        return {"shape": spec.shape, "dtype": spec.dtype}

    def output_info(self, output_name: str, job_name: str | None = None) -> dict[str, Any]:
        """``{"shape": ..., "dtype": ...}`` of an output."""
        self._check_status(self.SessionStatus.RUNNING)
        job = self._job_with(job_name, output_name, "output")
        assert job.function is not None
        lbn = next(lbn for name, lbn in job.outputs if name == output_name)
        spec = job.function.ensure_traced().specs[lbn]
        return {"shape": spec.shape, "dtype": spec.dtype}

    def _running(self) -> list[_Job]:
        return [job for job in self._jobs.values() if job.function is not None]

    def _named_job(self, job_name: str | None) -> _Job:
        known = [job.name for job in self._jobs.values() if job.graph is not None]
        if job_name is None:
            if len(known) != 1:
                raise SavedModelError(f"InferenceSession: name the job, one of {known}")
            job_name = known[0]
        if job_name not in known:
            raise SavedModelError(f"InferenceSession: no job {job_name!r}; its jobs: {known}")
        return self._jobs[job_name]

    def _job_with(self, job_name: str | None, name: str, kind: str) -> _Job:
        jobs = [self._named_job(job_name)] if job_name is not None else self._running()
        for job in jobs:
            names = [n for n, *_ in (job.inputs if kind == "input" else job.outputs)]
            if name in names:
                return job
        raise SavedModelError(f"InferenceSession: no {kind} {name!r}; the {kind}s are "
                              f"{[n for job in jobs for n, *_ in (job.inputs if kind == 'input' else job.outputs)]}")

    # running --------------------------------------------------------------
    def run(self, job_name: str, **kwargs: Any) -> list[np.ndarray]:
        """Run job ``job_name`` on the inputs given by name; its outputs, in ``list_outputs(job_name)`` order."""
        self._check_status(self.SessionStatus.RUNNING)
        job = self._named_job(job_name)
        where = f"InferenceSession.run({job_name!r})"
        names = [name for name, _, _ in job.inputs]
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise SavedModelError(f"{where}: unknown input(s) {unknown}; its inputs are {names}")
        feeds = []
        for name, _, spec in job.inputs:
            if name not in kwargs:
                raise SavedModelError(f"{where}: input {name!r} is absent; its inputs are {names}")
            value = kwargs[name]
            if not isinstance(value, np.ndarray):
                raise SavedModelError(f"{where}: input {name!r} must be a numpy.ndarray, got {type(value).__name__}")
            if value.shape != spec.shape or value.dtype != spec.dtype:
                raise SavedModelError(f"{where}: input {name!r} must be {spec.shape} {spec.dtype}, got {value.shape} "
                                      f"{value.dtype}")
            feeds.append(value)
        assert job.function is not None
        results = job.function(*feeds)
        return list(results) if job.outputs else []

    async def async_run(self, job_name: str, **kwargs: Any) -> list[np.ndarray]:
        """``run`` as a coroutine: the step runs in a worker thread while the event loop goes on."""
        self._check_status(self.SessionStatus.RUNNING)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.run, job_name, **kwargs))

    def close(self) -> None:
        """Finish the session's steps and end it; its jobs and variables are gone."""
        if self.status_ is self.SessionStatus.CLOSED:
            return
        self.status_ = self.SessionStatus.CLOSED
        self._session.close()


def _session_config(option: SessionOption) -> SessionConfig:
    config = SessionConfig()
    if isinstance(option.device_num, bool) or not isinstance(option.device_num, int) or option.device_num < 1:
        raise SavedModelError(f"SessionOption.device_num must be an int >= 1, got {option.device_num!r}")
    if option.device_tag == "gpu":
        config.gpu_device_num = option.device_num
    elif option.device_tag == "cpu":
        config.gpu_device_num = 0
        config.cpu_device_num = option.device_num
    else:
        raise SavedModelError(f"SessionOption.device_tag must be 'gpu' or 'cpu', got {option.device_tag!r}")
    return config


def _interface(job: _Job) -> None:
    """Name the job's inputs and outputs: by its signature, else by its input and return ops."""
    assert job.graph is not None
    graph, signature = job.graph, job.signature
    inputs: list[tuple[str, str, BlobSpec]] = []
    if signature is None:
        inputs = [(op_name, lbn, spec) for op_name, lbn, spec in graph.inputs]
        job.outputs = [(op_name, lbn) for op_name, lbn in graph.returns]
    else:
        named = {f"{d.lbi.op_name}/{d.lbi.blob_name}": (name, d) for name, d in signature.inputs.items()}
        for op_name, lbn, spec in graph.inputs:
            if lbn not in named:
                raise SavedModelError(f"job {job.name!r}: its input {op_name!r} ({lbn}) has no name in the signature; "
                                      f"the signature names {sorted(named)}")
            name, definition = named.pop(lbn)
            blob = definition.blob_conf
            if blob.shape.dim:
                spec = BlobSpec(tuple(blob.shape.dim), _op_list.numpy_dtype(blob.data_type, f"input {name!r}"))
            inputs.append((name, lbn, spec))
        if named:
            raise SavedModelError(f"job {job.name!r}: the signature's input(s) {sorted(n for n, _ in named.values())} "
                                  f"name no input of the job ({[lbn for _, lbn, _ in graph.inputs]})")
        job.outputs = sorted((name, f"{d.lbi.op_name}/{d.lbi.blob_name}") for name, d in signature.outputs.items())
    if job.batch_size is not None:
        inputs = [(name, lbn, BlobSpec((job.batch_size, *spec.shape[1:]), spec.dtype) if spec.shape else spec)
                  for name, lbn, spec in inputs]
    job.inputs = inputs


def _served_function(session: Session, job: _Job) -> JobFunction:
    """A predict job function of ``session`` whose body replays the job's saved ops."""
    graph = job.graph
    assert graph is not None
    saved_lbns = [lbn for _, lbn, _ in job.inputs]
    outputs = [lbn for _, lbn in job.outputs]

    def body(*blobs: Any) -> Any:
        values = graph.replay(current_builder("a served job"), dict(zip(saved_lbns, blobs)))
        missing = [lbn for lbn in outputs if lbn not in values]
        if missing:
            raise SavedModelError(f"job {job.name!r}: its output(s) {missing} are no value of the saved graph")
        return tuple(values[lbn] for lbn in outputs) if outputs else None

    params = [inspect.Parameter(f"input_{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=Numpy.Placeholder(spec.shape, dtype=spec.dtype))
              for i, (_, _, spec) in enumerate(job.inputs)]
    returns: Any = typing.Tuple[tuple(Numpy for _ in outputs)] if outputs else None
    body.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    body.__name__ = body.__qualname__ = job.name
    return JobFunction(body, "predict", None, session)
