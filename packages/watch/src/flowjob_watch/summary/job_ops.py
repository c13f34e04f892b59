"""The legacy summary ops inside a job: what happens when the job runs, not when it is traced.

``create_summary_writer`` and ``flush_summary_writer`` are op records of their own (no inputs, no
outputs, ``effect`` so dead-code elimination keeps them): their kernels open or flush the
process's current writer each time the step runs. ``scalar``, ``histogram``, ``image`` and ``pb``
write blob values, so they go through the watch machinery: each watches its value, step and tag
blobs with one collector sink, which writes the summary once it holds all three of a step (on the
host, after the step; a step run on several devices arrives merged).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from flowjob_core import (
    Blob, BlobSpec, Effects, FlowjobError, KernelContext, LegacyFace, OpDef, ShapeError, current_builder)
from flowjob_core.plan.mirrored import PerDevice

from flowjob_watch.api import add_watch
from flowjob_watch.sinks.base import Sink, logical
from flowjob_watch.summary import records, writer


def _no_inputs(op: str) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        if inputs:
            raise ShapeError(f"{op} takes no inputs, got {len(inputs)}")
        return []
    return infer


def _create_kernel(ctx: KernelContext) -> Callable[[], None]:
    logdir = ctx.attrs["logdir"]

    def run() -> None:
        writer.open_current(logdir)

    return run


def _flush_kernel(ctx: KernelContext) -> Callable[[], None]:
    what = f"flow.summary.flush_summary_writer (op {ctx.node_name!r})"
    return lambda: writer.current(what).flush()


CREATE_SUMMARY_WRITER = OpDef("create_summary_writer", _no_inputs("create_summary_writer"), kernel=_create_kernel,
                              not_differentiable=True,
                              doc="Opens the log folder's event-file writer as the process's current one.",
                              effects=Effects(host_state=True, effect=True),
                              legacy=LegacyFace(name_prefix="CreateWriter"))
FLUSH_SUMMARY_WRITER = OpDef("flush_summary_writer", _no_inputs("flush_summary_writer"), kernel=_flush_kernel,
                             not_differentiable=True, doc="Flushes the current summary writer.",
                             effects=Effects(host_state=True, effect=True),
                             legacy=LegacyFace(name_prefix="FlushWriter"))
OPS = (CREATE_SUMMARY_WRITER, FLUSH_SUMMARY_WRITER)


def create_summary_writer(logdir: str, name: str | None = None) -> None:
    """Open ``logdir``'s event-file writer when the job runs; later summary ops write to it."""
    if not isinstance(logdir, str) or not logdir:
        raise FlowjobError(f"flow.summary.create_summary_writer: logdir must be a non-empty str, got {logdir!r}")
    builder = current_builder("flow.summary.create_summary_writer")
    writer.summary_writer_class()
    writer.check_folder(logdir)
    builder.add_op("create_summary_writer", [], {"logdir": logdir}, name=name)


def flush_summary_writer(name: str | None = None) -> None:
    """Flush the current writer when the job runs (an error if none was opened by then)."""
    current_builder("flow.summary.flush_summary_writer").add_op("flush_summary_writer", [], {}, name=name)


class _Collector:
    """One summary op's value, step and tag of the step under way; writes when it has all of them."""

    def __init__(self, what: str, write: Callable[[Any, dict[str, Any]], None], roles: Sequence[str],
                 fixed: dict[str, Any]) -> None:
        self.what, self.write, self.roles, self.fixed = what, write, tuple(roles), fixed
        self.pending: dict[str, Any] = {}

    def put(self, role: str, value: Any) -> None:
        self.pending[role] = value
        if len(self.pending) == len(self.roles):
            values, self.pending = {**self.fixed, **self.pending}, {}
            self.write(writer.current(self.what), values)


class _Role(Sink):
    """The sink of one input of a summary op (a separate object per role: one blob may fill two)."""

    def __init__(self, collector: _Collector, role: str) -> None:
        self.collector, self.role = collector, role

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        if self.role != "value" and type(value) is PerDevice:
            # a step run per device feeds each its step and tag: one summary, if they agree
            pieces = [np.asarray(p) for p in value]
            if any(not np.array_equal(pieces[0], p) for p in pieces[1:]):
                raise FlowjobError(f"{self.collector.what}: the {self.role} differs across the {len(pieces)} devices")
            value = pieces[0]
        self.collector.put(self.role, np.asarray(logical(value, blob_def)))


def _step(value: Any, what: str) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise FlowjobError(f"{what}: step must be one integer, got shape {value.shape} {value.dtype}")
    return int(value.reshape(-1)[0])


def _tag(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    try:
        tag = records.as_text(value)
    except (FlowjobError, UnicodeDecodeError) as exc:
        raise FlowjobError(f"{what}: tag: {exc}") from None
    if not tag:
        raise FlowjobError(f"{what}: the tag is empty")
    return tag


def _summary_op(kind: str, prefix: str, inputs: dict[str, Any], name: str | None,
                write: Callable[[Any, dict[str, Any], str], None]) -> None:
    builder = current_builder(f"flow.summary.{kind}")
    writer.summary_writer_class()
    node = builder.op_name(name, prefix)
    what = f"flow.summary.{kind} (op {node!r} of job {builder.job.name!r})"
    blobs = {role: v for role, v in inputs.items() if isinstance(v, Blob)}
    fixed = {role: v for role, v in inputs.items() if not isinstance(v, Blob)}
    if "value" not in blobs:
        raise FlowjobError(f"{what}: value must be a blob of the job, got {type(inputs['value']).__name__}")
    for role, v in fixed.items():  # a Python step or tag is taken as it is (an extension: legacy fed blobs)
        if role == "step" and not (isinstance(v, (int, np.integer)) and not isinstance(v, bool)):
            raise FlowjobError(f"{what}: step must be an int64 blob or an int, got {v!r}")
        if role == "tag" and not (isinstance(v, str) and v):
            raise FlowjobError(f"{what}: tag must be an int8 blob of the tag's bytes or a str, got {v!r}")
    collector = _Collector(what, lambda w, values: write(w, values, what), tuple(blobs), fixed)
    for role, blob in blobs.items():
        if blob.builder.job is not builder.job:
            raise FlowjobError(f"{what}: {role} {blob.lbn!r} belongs to job {blob.builder.job.name!r}")
        add_watch(builder, blob, _Role(collector, role), diff=False)


def scalar(value: Blob, step: Blob | int, tag: Blob | str, name: str | None = None) -> None:
    """Write ``value`` (one number) as a TensorBoard scalar under ``tag`` at ``step`` each time the job runs.

    ``step``: an int64 blob of one element; ``tag``: an int8 blob of the tag's bytes (legacy feeds
    ``np.fromstring("loss", np.int8)``; NULs after the tag are dropped). A Python int / str is
    accepted too.
    """
    def write(w: Any, v: dict[str, Any], what: str) -> None:
        records.write_scalar(w, _tag(v["tag"], what), v["value"], _step(v["step"], what), what)
    _summary_op("scalar", "WriteScalar", {"value": value, "step": step, "tag": tag}, name, write)


def histogram(value: Blob, step: Blob | int, tag: Blob | str, name: str | None = None) -> None:
    """Write the values of ``value`` as a TensorBoard histogram (TensorFlow's default buckets)."""
    def write(w: Any, v: dict[str, Any], what: str) -> None:
        records.write_histogram(w, _tag(v["tag"], what), v["value"], _step(v["step"], what), what)
    _summary_op("histogram", "WriteHistogram", {"value": value, "step": step, "tag": tag}, name, write)


def image(value: Blob, step: Blob | int | None = None, tag: Blob | str | None = None,
          name: str | None = None) -> None:
    """Write a uint8 (N, H, W, C) batch as TensorBoard images (PNG), under ``tag`` (default ``"image"``)."""
    if step is None:
        raise FlowjobError("flow.summary.image: step is required (an int64 blob or an int)")

    def write(w: Any, v: dict[str, Any], what: str) -> None:
        records.write_images(w, _tag(v["tag"], what), v["value"], _step(v["step"], what), what)
    _summary_op("image", "WriteImage", {"value": value, "step": step, "tag": "image" if tag is None else tag},
                name, write)


def pb(value: Blob, step: Blob | int | None = None, name: str | None = None) -> None:
    """Write a ``Summary`` message given as the int8 bytes of its text (``str(flow.summary.text(...))``,
    ``str(flow.summary.hparams(...))``)."""
    if step is None:
        raise FlowjobError("flow.summary.pb: step is required (an int64 blob or an int)")

    def write(w: Any, v: dict[str, Any], what: str) -> None:
        records.write_pb(w, v["value"], _step(v["step"], what), what)
    _summary_op("pb", "WritePb", {"value": value, "step": step}, name, write)
