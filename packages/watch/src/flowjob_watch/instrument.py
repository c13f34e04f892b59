"""The watch pass: a fetch node per watched value (or gradient) and a side output for its consumer."""
from __future__ import annotations

from typing import Any

from flowjob_core import FlowjobError, SideOutput
from flowjob_core.tracing import JobBuilder


def instrument(job: Any, ctx: Any) -> None:
    builder = JobBuilder(job, ctx.session)
    fetched: dict[str, str] = {}
    for intent in job.intents:
        if intent.kind != "watch":
            continue
        lbn = intent.payload["lbn"]
        if intent.payload["diff"]:
            grad = job.grads.get(lbn)
            if grad is None:
                raise FlowjobError(f"job {job.name!r}: watch_diff({lbn!r}) at {intent.source}: no gradient "
                                   f"reaches this blob from the loss")
            lbn = grad
        if lbn not in fetched:
            stem = lbn.replace("/", "_")
            (out,) = builder.add_op("fetch", [builder.blob(lbn)], scoped_name=builder.local_name(f"Watch_{stem}"))
            fetched[lbn] = out.lbn
        consumer, blob = intent.payload["consumer"], intent.payload["blob"]
        job.side_outputs.append(SideOutput(fetched[lbn], _bind(consumer, blob), intent.payload["lbn"]))


def _bind(consumer: Any, blob: Any) -> Any:
    return lambda value: consumer(value, blob)
