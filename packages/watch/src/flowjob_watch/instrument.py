"""The watch pass: one fetch node per watched value (or gradient), one side output per watch.

Side outputs are delivered in the order the watch intents were recorded. A sink with
``end_step`` gets it called once per step, after its last value of the step. The intents
name their sink and blob by keys of the global function's bindings; this pass binds each
watch to a ``consume(value)`` callable there and records only its key in the side output.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core import FlowjobError, SideOutput
from flowjob_core.trace.builder import JobBuilder

from flowjob_watch.sinks.base import bind


def instrument(job: Any, ctx: Any) -> None:
    watches = [i for i in job.intents if i.kind == "watch"]
    if not watches:
        return  # watching costs nothing when unused
    bindings = ctx.bindings
    builder = JobBuilder(job, ctx.session, bindings=bindings)
    fetched: dict[str, str] = {}
    watched: list[tuple[str, str, str, Callable[[Any], None]]] = []  # (fetched lbn, label, sink key, consume)
    for intent in watches:
        p = intent.payload
        lbn = p["lbn"]
        if p["diff"]:
            grad = ctx.grads.get(lbn)
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
        consume = _bind(bind(bindings[p["sink"]], p["diff"]), bindings[p["blob_def"]])
        label = f"{p['lbn']}:diff" if p["diff"] else p["lbn"]  # as sinks file it
        watched.append((fetched[lbn], label, p["sink"], consume))
    last: dict[str, int] = {}  # sink key -> index of its last watch
    for index, (_, _, sink_key, _) in enumerate(watched):
        if callable(getattr(bindings[sink_key], "end_step", None)):
            last[sink_key] = index
    for index, (value_lbn, label, sink_key, consume) in enumerate(watched):
        if last.get(sink_key) == index:
            consume = _then_end_step(consume, bindings[sink_key], job.name)
        job.side_outputs.append(SideOutput(value_lbn, bindings.add(consume, "watch"), label))


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
