"""One eager tensor operation: a small job whose nodes run as they are added, kept for the backward pass.

A tensor operation feeds its tensors' arrays to a fresh job as ``input`` nodes, calls a function on blobs
(an op record through ``apply``, a blob operator of an op package) and runs each node it adds at once with
the kernel the planner would pick. What it adds is a ``Segment``; a result that needs a gradient keeps its
segment, and the backward pass splices the segments it reaches into one job (``flowjob_core.imperative.backprop``).
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator, Sequence

from flowjob_core.api.eager import build_kernel, run_node
from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import BlobSpec, Job, Node
from flowjob_core.plan import numerics
from flowjob_core.runtime.session import Session
from flowjob_core.trace.blob import Blob
from flowjob_core.trace.builder import JobBuilder

_JOB_IDS = itertools.count()  # job names only: every tape is its own job


class TapeBuilder(JobBuilder):
    """A job builder that runs each node right after its inference; ``values`` maps lbn -> array."""

    def __init__(self, session: Session, what: str, job_type: str = "predict") -> None:
        super().__init__(Job(f"{what}#{next(_JOB_IDS)}", job_type), session, session.backend.tag)
        self.values: dict[str, Any] = {}
        self.fed: dict[str, Any] = {}  # lbn of an input node -> what fed it (a tensor, or a seed)
        # no job function, so no per-function option: the session's choice turns the check on
        self._check = numerics.session_wanted(session.config)

    def feed(self, value: Any, owner: Any, name: str = "input") -> Blob:
        """An ``input`` node holding ``value`` (an array of the session's backend) for ``owner``."""
        spec = BlobSpec(tuple(value.shape), value.dtype)
        attrs = {"shape": spec.shape, "dtype": spec.dtype, "index": len(self.fed)}
        (blob,) = self.add_op("input", [], attrs, scoped_name=self.local_name(name), source="eager tensor")
        blob.batch_axis = None
        self.values[blob.lbn] = value
        self.fed[blob.lbn] = owner
        return blob

    def add_op(self, op_type: str, inputs: Sequence[Blob], attrs: dict[str, Any] | None = None,
               **kwargs: Any) -> tuple[Blob, ...]:
        outs = super().add_op(op_type, inputs, attrs, **kwargs)
        if op_type != "input":
            self._run(self.job.nodes[-1])
        return outs

    def _run(self, node: Node) -> None:
        opdef = self.registries.ops[node.op]
        if opdef.shape.dynamic_extent or opdef.effects.effect or opdef.effects.mutates:
            why = ("its rows depend on the data" if opdef.shape.dynamic_extent else
                   "it writes into its input" if opdef.effects.mutates else "it acts on the job's run")
            raise FlowjobError(f"eager tensors: op {node.name!r} ({node.op}) at {node.source} does not run on "
                               f"tensors ({why}); use it in a @flow.global_function job")
        fn = build_kernel(self, node, {}, self._check)  # a kernel per call: its outputs stay this tensor's
        run_node(fn, node, self.values, "eager tensors", "on tensors")

    @contextlib.contextmanager
    def recording(self) -> Iterator["TapeBuilder"]:
        """Ops called on this job's blobs go here (a function that builds a constant finds it too)."""
        with self.activate():
            yield self

    def segment(self) -> "Segment":
        return Segment(self.job, self.values, dict(self.fed))


class Segment:
    """The nodes one tensor operation ran, their values and the tensors fed to them (its ``input`` nodes)."""

    __slots__ = ("job", "values", "inputs", "freed")

    def __init__(self, job: Job, values: dict[str, Any], inputs: dict[str, Any]) -> None:
        self.job = job
        self.values = values
        self.inputs = inputs  # lbn of an input node -> the tensor it holds
        self.freed = False

    def free(self) -> None:
        """Drop the values kept for a gradient (``retain_graph=False`` after a backward pass)."""
        self.values = {}
        self.freed = True
