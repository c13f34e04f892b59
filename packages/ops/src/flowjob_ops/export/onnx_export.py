"""Legacy ``flow.onnx.export(job_func, model_save_dir, onnx_filename, ...)``: a predict job as an ONNX model,
its variables read from a checkpoint folder, through the ``onnx`` package (``pip install 'flowjob-ops[onnx]'``).

The job is the one its global function traced (before any pass: no fusion, no gradients); each placeholder is
a graph input named after its parameter, each variable an initializer from ``model_save_dir``, each return a
graph output named after its return op. The ops ONNX has are converted (``onnx_nodes.CONVERTERS``), each in
the form the chosen opset defines (10, the oldest legacy wrote, to the installed onnx's newest); any other op,
or an op whose operators the opset lacks, is refused, naming it (``onnx_coverage`` says why each op without a
converter has none). The model passes ``onnx.checker`` (by path where its weights are in an external data
file) before it is renamed into place beside the target; a failed write (a full disk) names the file and its
folder and leaves nothing behind.
"""
from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from flowjob_core import MissingPackageError
from flowjob_core.api.model_io import get as read_checkpoint
from flowjob_core.ir.job import Job

from flowjob_ops.export.onnx_coverage import reason
from flowjob_ops.export.onnx_emitter import OLDEST_OPSET, Emitter, OnnxExportError
from flowjob_ops.export.onnx_nodes import CONVERTERS

__all__ = ["export", "OnnxExportError"]

DEFAULT_OPSET = 13
"""The opset written when none is asked for (Softmax over any one axis, per-channel QuantizeLinear)."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise MissingPackageError("flow.onnx.export writes models with the onnx package, which is not installed; "
                                  "pip install 'flowjob-ops[onnx]'") from None
    return onnx


def export(job_func: Callable[..., Any], model_save_dir: str | os.PathLike[str], onnx_filename: str | os.PathLike[str],
           continue_on_error: bool = False, opset: int | None = None, extra_opset: Any = None,
           shape_override: Mapping[str, Sequence[int]] | None = None, external_data: bool = False) -> None:
    """Writes ``job_func``'s job as the ONNX model ``onnx_filename``.

    Args:
        job_func: a ``@flow.global_function`` (a predict job: a train job's update has no ONNX form).
        model_save_dir: a checkpoint folder (``flow.checkpoint.save`` / ``CheckPoint().save``) holding every
            variable the job reads.
        onnx_filename: where the model goes.
        continue_on_error: legacy wrote ops without a mapping as custom nodes ONNX runtimes cannot run; here
            such an op is always refused, naming it, so only False is accepted.
        opset: the ONNX opset, from 10 (legacy's oldest and its default) to the installed onnx's newest,
            default 13; each op is written in the opset's form, and an op with no form in it (``gather_nd``
            before 11, the adding scatters before 16) is refused, naming the op, the opset and the one it needs.
        extra_opset: legacy's opsets of custom ops; there are none here, so only None is accepted.
        shape_override: input name -> shape replacing the placeholder's declared shape.
        external_data: store the weights in ``<onnx_filename>.data`` beside the model (models over 2 GB).
    """
    onnx = _onnx()
    job = _job_of(job_func)
    if continue_on_error:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: continue_on_error=True wrote ops without an "
                              f"ONNX mapping as custom nodes no runtime runs; such ops are refused here")
    if extra_opset is not None:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: extra_opset names opsets of custom ops, which "
                              f"this exporter does not write; pass None")
    opset = _opset(onnx, opset, job)
    target = os.fspath(onnx_filename)
    variables = _variables(job, os.fspath(model_save_dir))
    external = ExternalData.lay_out(f"{os.path.basename(target)}.data", variables) if external_data else None
    model = build_model(onnx, job, variables, opset, dict(shape_override or {}), external)
    _write(onnx, model, target, external)


def _job_of(job_func: Callable[..., Any]) -> Job:
    trace = getattr(job_func, "ensure_traced", None)
    if trace is None:
        raise TypeError(f"flow.onnx.export: job_func must be a @flow.global_function, got {job_func!r}")
    job = trace()
    if job.type != "predict":
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r} is a {job.type} job; export a predict job "
                              f"(@flow.global_function(type='predict')) that computes the same values")
    return job


def _opset(onnx: Any, opset: int | None, job: Job) -> int:
    newest = onnx.defs.onnx_opset_version()
    chosen = DEFAULT_OPSET if opset is None else opset
    if isinstance(chosen, bool) or not isinstance(chosen, int) or not OLDEST_OPSET <= chosen <= newest:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: opset must be an int in [{OLDEST_OPSET}, "
                              f"{newest}] (the installed onnx {onnx.__version__} knows up to {newest}), got {opset!r}")
    return chosen


def _variables(job: Job, model_save_dir: str) -> dict[str, np.ndarray]:
    if not job.variables:
        return {}
    if not os.path.isdir(model_save_dir):
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: model_save_dir {model_save_dir!r} is not a "
                              f"folder (save the variables with flow.checkpoint.save first)")
    stored = read_checkpoint(model_save_dir)
    values = {}
    for name, var in job.variables.items():
        if name not in stored:
            raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: variable {name!r} is not in the checkpoint "
                                  f"{model_save_dir!r} (it holds {sorted(stored)[:8]})")
        array = np.asarray(stored[name])
        if array.shape != var.spec.shape or array.dtype != var.spec.dtype:
            raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: variable {name!r} is {var.spec} in the job, "
                                  f"{array.shape}:{array.dtype} in {model_save_dir!r}")
        values[name] = array
    return values


def _value_info(onnx: Any, name: str, dtype: np.dtype, shape: Sequence[int]) -> Any:
    return onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(dtype), list(shape))


@dataclass
class ExternalData:
    """Where each variable's bytes go in the external data file: the model refers to them by offset, and the
    file is written from the arrays themselves, so no copy of the weights is made in the model (a protobuf
    holds at most 2 GiB) nor serialized before it is checked."""

    location: str  # the data file's name, beside the model
    offsets: dict[str, int]  # variable name -> byte offset (page-aligned: runtimes map the file)
    arrays: dict[str, np.ndarray]

    @classmethod
    def lay_out(cls, location: str, variables: Mapping[str, np.ndarray]) -> ExternalData:
        offsets, end = {}, 0
        for name, array in variables.items():
            offsets[name] = end
            end += -(-array.nbytes // _PAGE) * _PAGE
        return cls(location, offsets, dict(variables))

    def tensor(self, onnx: Any, name: str, tensor_name: str) -> Any:
        array = self.arrays[name]
        tensor = onnx.TensorProto(name=tensor_name, dims=list(array.shape),
                                  data_type=onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", self.offsets[name]), ("length", array.nbytes)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        return tensor

    def write(self, path: str) -> None:
        with open(path, "wb") as f:
            for name, array in self.arrays.items():
                f.seek(self.offsets[name])
                # ONNX stores little-endian; tofile writes a contiguous array's buffer without a copy
                np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tofile(f)


_PAGE = 4096


def build_model(onnx: Any, job: Job, variables: Mapping[str, np.ndarray], opset: int,
                shape_override: Mapping[str, Sequence[int]], external: ExternalData | None = None) -> Any:
    """The ONNX ``ModelProto`` of ``job`` with the ``variables``' values as initializers (in ``external``'s
    data file where given)."""
    emitter = Emitter(onnx, job, opset)
    inputs = []
    for placeholder in job.placeholders:
        name = placeholder.param or placeholder.name
        shape = shape_override.get(name, placeholder.spec.shape)
        inputs.append(_value_info(onnx, name, placeholder.spec.dtype, shape))
        emitter.add("Identity", [name], [placeholder.lbn], placeholder.name)
    for name, var in job.variables.items():
        tensor_name = var.lbn or f"{name}/out"
        emitter.initializers.append(external.tensor(onnx, name, tensor_name) if external is not None
                                    else onnx.numpy_helper.from_array(variables[name], tensor_name))
    outputs = []
    for node in job.nodes:
        if node.op in ("input", "variable"):
            continue
        if node.op == "return":
            outputs.append(_value_info(onnx, node.name, job.specs[node.inputs[0]].dtype,
                                       job.specs[node.inputs[0]].shape))
            emitter.add("Identity", [node.inputs[0]], [node.name], node.name)
            continue
        convert = CONVERTERS.get(node.op)
        if convert is None:
            why = reason(node.op) or "no ONNX converter is written for it"
            raise OnnxExportError(f"flow.onnx.export: job {job.name!r}, op {node.name!r} ({node.op}) at "
                                  f"{node.source or 'an unknown line'} has no ONNX mapping: {why} (python -m "
                                  f"oneflow info lists the ops that export)")
        emitter.node = node
        convert(emitter, node)
        emitter.node = None
    if not outputs:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r} returns nothing; an ONNX model needs an output")
    graph = onnx.helper.make_graph(emitter.nodes, job.name, inputs, outputs, emitter.initializers)
    opsets = [onnx.helper.make_opsetid("", opset)]
    # the oldest IR version that carries the opset, so runtimes of that opset's time load the model
    return onnx.helper.make_model(graph, producer_name="flowjob", opset_imports=opsets,
                                  ir_version=onnx.helper.find_min_ir_version_for(opsets))


def _write(onnx: Any, model: Any, target: str, external: ExternalData | None) -> None:
    """The model (and its data file) written and checked in a folder beside ``target``, then renamed into
    place; a write that fails (a full disk, no permission) names the file and folder and leaves neither."""
    folder = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    try:
        with tempfile.TemporaryDirectory(dir=folder, prefix=f".{base}.") as scratch:
            staged = os.path.join(scratch, base)
            if external is None:
                try:
                    onnx.checker.check_model(model)
                    onnx.save_model(model, staged)
                except ValueError as exc:  # protobuf's 2 GiB limit
                    raise OnnxExportError(f"flow.onnx.export: the model does not fit one protobuf file ({exc}); "
                                          f"pass external_data=True") from None
                os.replace(staged, target)
                return
            external.write(os.path.join(scratch, external.location))
            onnx.save_model(model, staged)
            # checked by path, as the onnx package documents for external data: the weights are in the file
            onnx.checker.check_model(staged)
            data = os.path.join(folder, external.location)
            os.replace(os.path.join(scratch, external.location), data)
            try:
                os.replace(staged, target)
            except OSError:
                os.unlink(data)
                raise
    except OSError as exc:
        what = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror or str(exc)
        files = f"{target!r}" + (f" and its data file {external.location!r}" if external is not None else "")
        raise OnnxExportError(f"flow.onnx.export: could not write the ONNX model {files} in folder {folder!r}: "
                              f"{what} ({type(exc).__name__} errno {exc.errno}); nothing was written there") from exc
