"""An op that writes tensors' values (an optimizer's update), built once and run on eager tensors call after call.

A tape operation refuses an op that writes into its inputs (``OpDef.effects.mutates``): a value kept for a gradient must
stay what it was. A ``TensorUpdate`` runs such an op instead. Its job and kernel are built once, for the specs of
the operands it was made with; each call runs that kernel on copies of the values the op writes, and the tensors
then hold the copies (as ``copy_`` gives a tensor a new array). So no job is built per call, and an array handed
out before (``detach()``, a kept segment) keeps its value.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core.api.eager import build_kernel
from flowjob_core.errors import FlowjobError
from flowjob_core.imperative.tape import TapeBuilder
from flowjob_core.imperative.tensor import Tensor
from flowjob_core.ir.job import BlobSpec, Node
from flowjob_core.runtime.session import get_default_session
from flowjob_core.trace.builder import apply

Operand = Any
"""A ``Tensor``, an array of the session's backend, or a number for an operand of shape (1,) (a learning rate)."""


class _UpdateBuilder(TapeBuilder):
    """A tape whose one op is built, not run: ``TensorUpdate`` runs its kernel on copies."""

    node: Node | None = None

    def _run(self, node: Node) -> None:
        self.node = node


class TensorUpdate:
    """``op_type`` with ``attrs`` on operands of the specs of ``operands``; calling it runs the op on new operands
    of the same specs, and each tensor the op writes (``OpDef.effects.mutates``) holds the value written. ``what`` names
    the update in errors (``"flow.optim.SGD, parameter 0"``)."""

    def __init__(self, op_type: str, operands: Sequence[Operand], attrs: dict[str, Any], what: str) -> None:
        self.what = what
        session = get_default_session()
        self._backend = session.backend
        arrays = [self._array(op, i) for i, op in enumerate(operands)]
        self.specs = tuple(BlobSpec(tuple(a.shape), a.dtype) for a in arrays)
        tape = _UpdateBuilder(session, what, "train")
        blobs = [tape.feed(array, None, f"operand_{i}") for i, array in enumerate(arrays)]
        with tape.recording():
            apply(op_type, blobs, attrs)
        if tape.node is None:
            raise FlowjobError(f"{what}: op {op_type!r} added no node")
        opdef = tape.registries.ops[tape.node.op]
        if opdef.shape.dynamic_extent or opdef.effects.effect:
            raise FlowjobError(f"{what}: op {op_type!r} does not run on tensors (it acts on a job's run)")
        if not opdef.effects.mutates:
            raise FlowjobError(f"{what}: op {op_type!r} writes none of its inputs; compute with tensor operations "
                               f"instead")
        self.writes = tuple(opdef.effects.mutates)
        self._kernel = build_kernel(tape, tape.node, {}, tape._check)

    def _array(self, operand: Operand, index: int) -> Any:
        if isinstance(operand, Tensor):
            return operand._value
        if isinstance(operand, (int, float, np.floating, np.integer)) and not isinstance(operand, bool):
            return self._backend.from_host(np.array([operand], np.float32))
        if hasattr(operand, "shape") and hasattr(operand, "dtype"):
            return operand
        raise TypeError(f"{self.what}: operand {index} must be a flow.Tensor, an array or a number, got "
                        f"{type(operand).__name__}")

    def __call__(self, *operands: Operand) -> None:
        if len(operands) != len(self.specs):
            raise FlowjobError(f"{self.what}: {len(operands)} operands given, the update was built for "
                               f"{len(self.specs)}")
        arrays = []
        for i, (operand, spec) in enumerate(zip(operands, self.specs)):
            array = self._array(operand, i)
            if BlobSpec(tuple(array.shape), array.dtype) != spec:
                raise FlowjobError(f"{self.what}: operand {i} is {BlobSpec(tuple(array.shape), array.dtype)}, the "
                                   f"update was built for {spec}")
            arrays.append(array)
        for i in self.writes:
            if not isinstance(operands[i], Tensor):
                raise TypeError(f"{self.what}: operand {i} is written by the update and must be a flow.Tensor, "
                                f"got {type(operands[i]).__name__}")
            arrays[i] = arrays[i].copy()
        try:
            self._kernel(*arrays)
        except FlowjobError:
            raise
        except Exception as exc:
            raise FlowjobError(f"{self.what}: the update's kernel failed: {exc!r}") from exc
        for i in self.writes:
            operands[i]._value = arrays[i]


__all__ = ["TensorUpdate"]
