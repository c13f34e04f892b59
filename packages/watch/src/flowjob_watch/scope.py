"""``flow.watch_scope``: watch (and diff-watch) every blob created inside a ``with`` block.

Delivery order, which a dict watcher's key order shows: values are delivered variables
first (their value is there before the step's first op; by name), then computed blobs in
the order they were created; gradients are delivered computed blobs first (creation order),
then variables (by name: a variable's gradient is complete only once every use has added to
it). The scope's watches follow the watches its body made, in the order scopes close.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from flowjob_core import Blob, FlowjobError, current_builder
from flowjob_core.trace import scope

from flowjob_watch.api import add_watch
from flowjob_watch.sinks.base import Sink, resolve


def _sinks(registries: Any, watcher: Any, sink: Any, what: str) -> list[Any]:
    found = []
    if watcher is not None:
        if isinstance(watcher, dict):
            found.append(resolve(registries, "dict", watcher, {}, what))
        elif isinstance(watcher, Sink):
            found.append(watcher)
        elif callable(watcher):
            found.append(resolve(registries, "callback", watcher, {"pass_blob": True}, what))
        else:
            raise FlowjobError(f"{what}: a watcher must be a dict, a callable(value, blob_def) or a sink, "
                               f"got {type(watcher).__name__}")
    if sink is not None:
        found.append(resolve(registries, sink, None, {}, what) if isinstance(sink, str) else sink)
    return found


@contextlib.contextmanager
def watch_scope(blob_watcher: Any = None, diff_blob_watcher: Any = None, *, sink: Any = None,
                diff_sink: Any = None) -> Iterator[None]:
    """Watch every blob created inside (variables included, each lbn once); diff-watch them too when
    ``diff_blob_watcher`` or ``diff_sink`` is given (blobs without a gradient are skipped).

    A dict watcher gets ``d[lbn] = {"blob": <local blob>, "blob_def": <blob>}`` each step (the
    gradient dict keyed by the forward lbn); a callable gets ``(value, blob_def)``; ``sink`` /
    ``diff_sink`` take a sink name or object (``sink="stats"``).
    """
    what = "flow.watch_scope"
    builder = current_builder(what)
    values = _sinks(builder.registries, blob_watcher, sink, what)
    grads = _sinks(builder.registries, diff_blob_watcher, diff_sink, what)
    seen: dict[str, Blob] = {}

    def observe(blob: Blob) -> None:
        if blob.builder.job is builder.job:
            seen.setdefault(blob.lbn, blob)

    with scope.observe_blobs(observe):
        yield
    variables = {v.lbn for v in builder.job.variables.values()}
    held = sorted((b for b in seen.values() if b.lbn in variables), key=lambda b: b.lbn)
    computed = [b for b in seen.values() if b.lbn not in variables]
    for target in values:
        for blob in held + computed:
            add_watch(builder, blob, target, diff=False)
    for target in grads:
        for blob in computed + held:
            add_watch(builder, blob, target, diff=True, optional=True)
