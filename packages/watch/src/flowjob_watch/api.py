"""``flow.watch`` and ``flow.watch_diff``: record intents while tracing; the watch pass wires them."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob, FlowjobError, current_builder

from flowjob_watch.handlers import make_consumer


def _check(blob: Any, what: str) -> Any:
    builder = current_builder(what)
    if not isinstance(blob, Blob):
        raise FlowjobError(f"{what}: expected a blob of job {builder.job.name!r}, got {type(blob).__name__}")
    return builder


def watch(blob: Blob, handler_or_prompt: Any = None) -> None:
    """Hand ``blob``'s value to the handler after every step (a string or None prints it)."""
    what = f"flow.watch({blob.lbn if isinstance(blob, Blob) else blob!r})"
    builder = _check(blob, what)
    consumer = make_consumer(handler_or_prompt, builder.registries, what)
    builder.add_intent("watch", lbn=blob.lbn, blob=blob, consumer=consumer, diff=False)


def watch_diff(blob: Blob, handler_or_prompt: Any = None) -> None:
    """Hand ``blob``'s raw gradient (loss seed ones, before 1/N scaling) to the handler after every step."""
    what = f"flow.watch_diff({blob.lbn if isinstance(blob, Blob) else blob!r})"
    builder = _check(blob, what)
    consumer = make_consumer(handler_or_prompt, builder.registries, what)
    builder.request_grad(blob)
    builder.add_intent("watch", lbn=blob.lbn, blob=blob, consumer=consumer, diff=True)
