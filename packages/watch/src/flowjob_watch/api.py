"""``flow.watch`` and ``flow.watch_diff``: record intents while tracing; the watch pass wires them."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob, FlowjobError, current_builder
from flowjob_core.trace.builder import JobBuilder

from flowjob_watch.sinks.base import resolve


def _builder(blob: Any, what: str) -> JobBuilder:
    builder = current_builder(what)
    if not isinstance(blob, Blob):
        raise FlowjobError(f"{what}: expected a blob of job {builder.job.name!r}, got {type(blob).__name__}")
    if blob.builder.job is not builder.job:
        raise FlowjobError(f"{what}: the blob belongs to job {blob.builder.job.name!r}, "
                           f"not to {builder.job.name!r} being traced")
    return builder


def add_watch(builder: JobBuilder, blob: Blob, sink: Any, *, diff: bool, optional: bool = False) -> None:
    """Record one watch intent: after every step, ``sink`` receives ``blob``'s value (or raw gradient).

    ``optional``: a gradient that autodiff did not compute is skipped instead of being an error
    (watch_scope's diff watcher sees only the gradients that exist).
    """
    # the job stays data: the sink and the symbolic blob it will be handed are named by keys of the
    # global function's bindings (the same sink object always gets the same key: end_step is per sink)
    builder.add_intent("watch", lbn=blob.lbn, diff=diff, optional=optional,
                       sink=builder.bindings.add(sink, type(sink).__name__),
                       blob_def=builder.bindings.add(blob, "blob"))


def watch(blob: Blob, handler_or_prompt: Any = None, *, sink: Any = None, **options: Any) -> None:
    """Hand ``blob``'s value to a handler or sink after every step.

    ``handler_or_prompt``: a one-parameter callable (annotated ``tp.Numpy``/``ListNumpy``/
    ``ListListNumpy`` for arrays, unannotated for the legacy local blob), a prompt string or
    None (print the value), or a ``flowjob_watch.sinks.Sink`` object. ``sink``: a registered
    sink name (``"callback"``, ``"dict"``, ``"recorder"``, ``"stats"``, ``"tensorboard"``, or a plugin's;
    ``handler_or_prompt`` is then its target and ``options`` its options) or a sink object.
    """
    what = f"flow.watch({blob.lbn if isinstance(blob, Blob) else blob!r})"
    builder = _builder(blob, what)
    target = resolve(builder.registries, sink, handler_or_prompt, options, what)
    add_watch(builder, blob, target, diff=False)


def watch_diff(blob: Blob, handler_or_prompt: Any = None, *, sink: Any = None, **options: Any) -> None:
    """Hand ``blob``'s raw gradient (loss seed ones, before the 1/N scaling) to a handler or sink after
    every step of a train job. A blob with no gradient from the loss is an error when the job is planned."""
    what = f"flow.watch_diff({blob.lbn if isinstance(blob, Blob) else blob!r})"
    builder = _builder(blob, what)
    target = resolve(builder.registries, sink, handler_or_prompt, options, what)
    builder.request_grad(blob)
    add_watch(builder, blob, target, diff=True)
