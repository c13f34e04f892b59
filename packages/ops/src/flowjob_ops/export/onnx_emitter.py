"""What ONNX converters write into: the ``Emitter`` (nodes, constant initializers, unique names) and the forms
of the operators whose inputs and attributes changed between opsets.

The exporter writes opsets 10 (the oldest legacy's exporter wrote) to the installed onnx's newest. Each
opset-dependent operator is written in the form its opset defines (``clip``, ``pad``, ``reduce``,
``squeeze``/``unsqueeze``, ``split``); every node is checked against the opset's schemas as it is added, so
an operator the opset lacks is refused there, naming the flowjob op and the opset.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from flowjob_core import FlowjobError
from flowjob_core.ir.job import Job, Node

__all__ = ["Emitter", "OnnxExportError", "OLDEST_OPSET"]

OLDEST_OPSET = 10
"""The oldest opset written: legacy's exporter wrote 10 and up (its tests ask for 10 and 11)."""

_REDUCE_AXES_INPUT = {"ReduceSum": 13}
"""The opset where a reduce's ``axes`` became an input: ReduceSum at 13, every other reduce at 18."""


class OnnxExportError(FlowjobError, ValueError):
    """A job that cannot become an ONNX model as asked (names the job, op or variable)."""


@dataclass
class Emitter:
    """What converters add to: ONNX nodes and constant initializers, with names unique in the graph."""

    onnx: Any  # the onnx module (an optional dependency, imported by the exporter)
    job: Job
    opset: int
    nodes: list[Any] = field(default_factory=list)
    initializers: list[Any] = field(default_factory=list)
    node: Node | None = None  # the flowjob node being converted, named when an operator has no form
    _count: int = 0
    _known: dict[str, int | None] = field(default_factory=dict)

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}/onnx_{self._count}"

    def since(self, op_type: str) -> int | None:
        """The oldest opset defining ``op_type`` (None: no opset up to this one defines it)."""
        if op_type not in self._known:
            first: int | None = None
            for version in range(self.opset, self.onnx.defs.onnx_opset_version() + 1):
                try:
                    schema = self.onnx.defs.get_schema(op_type, version)
                except self.onnx.defs.SchemaError:
                    continue
                if version == self.opset and schema.deprecated:
                    break  # deprecated at this opset (Upsample from 10): no form
                first = version if version > self.opset else schema.since_version
                break
            self._known[op_type] = first
        return self._known[op_type]

    def refuse(self, why: str) -> OnnxExportError:
        where = f"op {self.node.name!r} ({self.node.op})" if self.node is not None else "the model"
        return OnnxExportError(f"flow.onnx.export: job {self.job.name!r}, {where}: {why}")

    def require(self, op_type: str) -> None:
        """Raises naming the op and the opset where ``op_type`` has no form at ``self.opset``."""
        first = self.since(op_type)
        if first is not None and first <= self.opset:
            return
        later = f"; export with opset >= {first}" if first is not None else ""
        raise self.refuse(f"ONNX opset {self.opset} has no {op_type}, which this op is written with{later}")

    def _require_attributes(self, op_type: str, attrs: dict[str, Any]) -> None:
        """Raises naming the op and opset where ``op_type`` takes no such attribute yet (GatherND's
        batch_dims before 12, ScatterND's reduction before 16)."""
        known = self.onnx.defs.get_schema(op_type, self.opset).attributes
        for key in attrs:
            if key in known:
                continue
            later = next((v for v in range(self.opset + 1, self.onnx.defs.onnx_opset_version() + 1)
                          if key in self.onnx.defs.get_schema(op_type, v).attributes), None)
            hint = f"; export with opset >= {later}" if later is not None else ""
            raise self.refuse(f"ONNX opset {self.opset} has no {op_type} with attribute {key!r}, which this op is "
                              f"written with{hint}")

    def add(self, op_type: str, inputs: list[str], outputs: list[str] | None = None, stem: str = "",
            **attrs: Any) -> str:
        """One ONNX node; returns its (first) output name, made up when ``outputs`` is None."""
        self.require(op_type)
        if attrs:
            self._require_attributes(op_type, attrs)
        outs = outputs if outputs is not None else [self.fresh(stem or op_type)]
        name = self.fresh(stem or op_type)
        self.nodes.append(self.onnx.helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0]

    def constant(self, value: Any, stem: str, dtype: Any = None) -> str:
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(stem)
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def dtype(self, lbn: str) -> np.dtype:
        return self.job.specs[lbn].dtype

    def shape(self, lbn: str) -> tuple[int, ...]:
        return self.job.specs[lbn].shape

    def tensor_type(self, dtype: Any) -> int:
        return int(self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))

    # the operators whose form changed between opsets ------------------------------------------
    def clip(self, x: str, low: float | None, high: float | None, outputs: list[str] | None, stem: str,
             dtype: Any = None) -> str:
        """``Clip``: bounds are attributes before opset 11 (floats only), optional inputs from 11. ``dtype``:
        x's, where x is no value of the job."""
        dtype = np.dtype(dtype if dtype is not None else self.dtype(x))
        if self.opset < 11:
            if dtype.kind != "f":
                raise self.refuse(f"ONNX opset {self.opset}'s Clip takes floats only, got {dtype}; export "
                                  f"with opset >= 11")
            bounds = {key: float(v) for key, v in (("min", low), ("max", high)) if v is not None}
            return self.add("Clip", [x], outputs, stem, **bounds)
        operands = [self.constant(v, f"{stem}/clip", dtype) if v is not None else "" for v in (low, high)]
        while operands and not operands[-1]:
            operands.pop()  # "" skips an optional input
        return self.add("Clip", [x, *operands], outputs, stem)

    def pad(self, x: str, pads: Sequence[int], value: float, outputs: list[str] | None, stem: str,
            mode: str = "constant") -> str:
        """``Pad``: ``pads`` and ``value`` are attributes before opset 11, inputs from 11."""
        if self.opset < 11:
            return self.add("Pad", [x], outputs, stem, mode=mode, pads=[int(p) for p in pads], value=float(value))
        operands = [x, self.constant([int(p) for p in pads], f"{stem}/pads", np.int64)]
        if mode == "constant":
            operands.append(self.constant(value, f"{stem}/value", self.dtype(x)))
        return self.add("Pad", operands, outputs, stem, mode=mode)

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool, outputs: list[str] | None,
               stem: str) -> str:
        """``Reduce*``: ``axes`` an attribute, then an input (ReduceSum at 13, the others at 18)."""
        keep = int(bool(keepdims))
        if self.opset >= _REDUCE_AXES_INPUT.get(op_type, 18):
            return self.add(op_type, [x, self.constant(list(axes), f"{stem}/axes", np.int64)], outputs, stem,
                            keepdims=keep)
        return self.add(op_type, [x], outputs, stem, axes=list(axes), keepdims=keep)

    def _axes_op(self, op_type: str, x: str, axes: Sequence[int], outputs: list[str] | None, stem: str) -> str:
        if self.opset >= 13:
            return self.add(op_type, [x, self.constant(list(axes), f"{stem}/axes", np.int64)], outputs, stem)
        return self.add(op_type, [x], outputs, stem, axes=list(axes))

    def squeeze(self, x: str, axes: Sequence[int], outputs: list[str] | None, stem: str) -> str:
        """``Squeeze``: ``axes`` an attribute before opset 13, an input from 13."""
        return self._axes_op("Squeeze", x, axes, outputs, stem)

    def unsqueeze(self, x: str, axes: Sequence[int], outputs: list[str] | None, stem: str) -> str:
        """``Unsqueeze``: ``axes`` an attribute before opset 13, an input from 13."""
        return self._axes_op("Unsqueeze", x, axes, outputs, stem)

    def split(self, x: str, axis: int, sizes: Sequence[int], outputs: list[str], stem: str) -> list[str]:
        """``Split``: ``split`` (the sizes) an attribute before opset 13, an input from 13."""
        if self.opset >= 13:
            self.add("Split", [x, self.constant([int(s) for s in sizes], f"{stem}/split", np.int64)], outputs, stem,
                     axis=axis)
        else:
            self.add("Split", [x], outputs, stem, axis=axis, split=[int(s) for s in sizes])
        return outputs

    def slice(self, x: str, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
              steps: Sequence[int], outputs: list[str] | None, stem: str) -> str:
        """``Slice`` with its bounds as inputs (opset 10 on)."""
        operands = [self.constant([int(v) for v in values], f"{stem}/{what}", np.int64)
                    for what, values in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps))]
        return self.add("Slice", [x, *operands], outputs, stem)

    def softmax(self, op_type: str, x: str, axis: int, outputs: list[str], stem: str) -> str:
        """``Softmax``/``LogSoftmax`` over one axis: before opset 13 the operator flattens to 2-D at ``axis``,
        the same only for the last axis, so another axis is moved last and back."""
        rank = len(self.shape(x))
        axis %= rank
        if self.opset >= 13 or axis == rank - 1:
            return self.add(op_type, [x], outputs, stem, axis=axis)
        perm = [i for i in range(rank) if i != axis] + [axis]
        inverse = [int(i) for i in np.argsort(perm)]
        moved = self.add("Transpose", [x], stem=stem, perm=perm)
        done = self.add(op_type, [moved], stem=stem, axis=rank - 1)
        return self.add("Transpose", [done], outputs, stem, perm=inverse)
