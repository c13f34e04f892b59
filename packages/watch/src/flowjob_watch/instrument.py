"""The watch pass: one fetch node per watched value (or gradient), one side output per watch.

Side outputs are delivered in the order the watch intents were recorded. A sink with
``end_step`` gets it called once per step, after its last value of the step.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from flowjob_core import FlowjobError, SideOutput
from flowjob_core.tracing import JobBuilder


def instrument(job: Any, ctx: Any) -> None:
    watches = [i for i in job.intents if i.kind == "watch"]
    if not watches:
        return  # watching costs nothing when unused
    builder = JobBuilder(job, ctx.session)
    fetched: dict[str, str] = {}
    last: dict[int, tuple[int, Any]] = {}  # id(sink) -> (index of its last side output, sink)
    for intent in watches:
        p = intent.payload
        lbn = p["lbn"]
        if p["diff"]:
            grad = job.grads.get(lbn)
            if grad is None:
                if p.get("optional"):
                    continue
                raise FlowjobError(f"job {job.name!r}: watch_diff({lbn!r}) at {intent.source}: no gradient "
                                   f"reaches this blob from the loss")
            lbn = grad
        if lbn not in fetched:  # one copy per value, however many watch it
            stem = lbn.replace("/", "_")
            (out,) = builder.add_op("fetch", [builder.blob(lbn)], scoped_name=builder.local_name(f"Watch_{stem}"))
            fetched[lbn] = out.lbn
        job.side_outputs.append(SideOutput(fetched[lbn], _bind(p["consume"], p["blob"]), p["lbn"]))
        if callable(getattr(p["sink"], "end_step", None)):
            last[id(p["sink"])] = (len(job.side_outputs) - 1, p["sink"])
    for index, sink in last.values():
        side = job.side_outputs[index]
        job.side_outputs[index] = dataclasses.replace(side, consumer=_then_end_step(side.consumer, sink, job.name))


def _bind(consume: Callable[[Any, Any], None], blob: Any) -> Callable[[Any], None]:
    return lambda value: consume(value, blob)


def _then_end_step(consume: Callable[[Any], None], sink: Any, job_name: str) -> Callable[[Any], None]:
    end_step = sink.end_step

    def run(value: Any) -> None:
        try:
            consume(value)
        finally:
            end_step(job_name)

    return run
