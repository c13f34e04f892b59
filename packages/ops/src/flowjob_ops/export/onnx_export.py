"""Legacy ``flow.onnx.export(job_func, model_save_dir, onnx_filename, ...)``: a predict job as an ONNX model,
its variables read from a checkpoint folder, through the ``onnx`` package (``pip install 'flowjob-ops[onnx]'``).

The job is the one its global function traced (before any pass: no fusion, no gradients); each placeholder is
a graph input named after its parameter, each variable an initializer from ``model_save_dir``, each return a
graph output named after its return op. The ops ONNX has are converted (``onnx_nodes.CONVERTERS``); any other
op is refused, naming it. The model passes ``onnx.checker`` before it is written (beside the target, then
renamed into place).
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from flowjob_core import FlowjobError, MissingPackageError
from flowjob_core.api.model_io import get as read_checkpoint
from flowjob_core.ir.job import Job

from flowjob_ops.export.onnx_nodes import CONVERTERS, Emitter

__all__ = ["export"]

DEFAULT_OPSET = 13
"""The oldest opset whose operators the converters write (Softmax over one axis, ReduceSum's axes input)."""


class OnnxExportError(FlowjobError, ValueError):
    """A job that cannot become an ONNX model as asked (names the job, op or variable)."""


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
        opset: the ONNX opset, default 13 (the oldest the converters write), at most the installed onnx's.
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
    model = build_model(onnx, job, _variables(job, os.fspath(model_save_dir)), opset, dict(shape_override or {}))
    onnx.checker.check_model(model)
    _write(onnx, model, os.fspath(onnx_filename), external_data)


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
    if isinstance(chosen, bool) or not isinstance(chosen, int) or not DEFAULT_OPSET <= chosen <= newest:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r}: opset must be an int in [{DEFAULT_OPSET}, "
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


def build_model(onnx: Any, job: Job, variables: Mapping[str, np.ndarray], opset: int,
                shape_override: Mapping[str, Sequence[int]]) -> Any:
    """The ONNX ``ModelProto`` of ``job`` with the ``variables``' values as initializers."""
    emitter = Emitter(onnx, job, opset)
    inputs = []
    for placeholder in job.placeholders:
        name = placeholder.param or placeholder.name
        shape = shape_override.get(name, placeholder.spec.shape)
        inputs.append(_value_info(onnx, name, placeholder.spec.dtype, shape))
        emitter.add("Identity", [name], [placeholder.lbn], placeholder.name)
    for name, var in job.variables.items():
        emitter.initializers.append(onnx.numpy_helper.from_array(variables[name], var.lbn or f"{name}/out"))
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
            raise OnnxExportError(f"flow.onnx.export: job {job.name!r}, op {node.name!r} ({node.op}) at "
                                  f"{node.source or 'an unknown line'} has no ONNX mapping; the ops exported are "
                                  f"{', '.join(sorted(CONVERTERS))}")
        convert(emitter, node)
    if not outputs:
        raise OnnxExportError(f"flow.onnx.export: job {job.name!r} returns nothing; an ONNX model needs an output")
    graph = onnx.helper.make_graph(emitter.nodes, job.name, inputs, outputs, emitter.initializers)
    return onnx.helper.make_model(graph, producer_name="flowjob", opset_imports=[onnx.helper.make_opsetid("", opset)])


def _write(onnx: Any, model: Any, target: str, external_data: bool) -> None:
    """The model (and its ``.data`` file) written in a folder beside ``target``, then renamed into place."""
    folder = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{base}.") as scratch:
        staged = os.path.join(scratch, base)
        if external_data:
            onnx.save_model(model, staged, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=f"{base}.data")  # small tensors (shapes, axes) stay inline for runtimes
            onnx.checker.check_model(staged)  # by path: the weights are in the data file
            os.replace(os.path.join(scratch, f"{base}.data"), os.path.join(folder, f"{base}.data"))
        else:
            try:
                onnx.save_model(model, staged)
            except ValueError as exc:  # protobuf's 2 GB limit
                raise OnnxExportError(f"flow.onnx.export: the model does not fit one protobuf file ({exc}); pass "
                                      f"external_data=True") from None
        os.replace(staged, target)
