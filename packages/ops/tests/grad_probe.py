"""A test plugin that hands raw gradients (and values) of a train job to Python after each step.

flowjob-watch is not a dependency of flowjob-ops, so its tests read gradients with this
probe: ``probe(blob, key)`` in a job body, ``session_with_probe()`` for the session, and
``RESULTS[key]`` after a call. The pass runs after autodiff, so a probed gradient also keeps
the backward pass alive without an optimizer.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core import FlowjobError, JobFunction, Session, SideOutput, current_builder, hookimpl, make_plugin_manager
from flowjob_core.trace.builder import JobBuilder

INTENT = "ops_test_probe"
RESULTS: dict[str, np.ndarray] = {}


def probe(blob: Any, key: str, diff: bool = True) -> None:
    """After every step, ``RESULTS[key]`` holds the raw gradient of ``blob`` (or its value with diff=False)."""
    builder = current_builder("probe")
    if diff:
        builder.request_grad(blob)
    builder.add_intent(INTENT, lbn=blob.lbn, key=key, diff=diff)


def _store(key: str) -> Callable[[Any], None]:
    def consume(value: Any) -> None:
        RESULTS[key] = np.array(value, copy=True)

    return consume


def _instrument(job: Any, ctx: Any) -> None:
    builder = JobBuilder(job, ctx.session)
    for intent in job.intents:
        if intent.kind != INTENT:
            continue
        lbn = intent.payload["lbn"]
        if intent.payload["diff"]:
            lbn = ctx.grads.get(lbn)
            if lbn is None:
                raise FlowjobError(f"probe: no gradient reaches {intent.payload['lbn']!r}")
        (out,) = builder.add_op("fetch", [builder.blob(lbn)], scoped_name=builder.local_name("probe"))
        key = intent.payload["key"]
        job.side_outputs.append(SideOutput(out.lbn, ctx.bindings.add(_store(key), f"probe_{key}"), key))


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add("ops-test-probe", _instrument, after="autodiff", before="dce")


def session_with_probe() -> Session:
    """A session of core, flowjob-ops, flowjob-typing and the probe: no other installed plugin (an
    optimizer package would want an optimizer in every train job)."""
    import sys

    import flowjob_ops.plugin
    import flowjob_typing.plugin

    plugins = [flowjob_ops.plugin, flowjob_typing.plugin, sys.modules[__name__]]
    return Session(make_plugin_manager(plugins=plugins, autoload=False))


def job(session: Session, job_type: str = "train") -> Callable[[Callable[..., Any]], JobFunction]:
    """``@job(session)``: a global function of ``session`` (not the default session)."""
    return lambda func: JobFunction(func, job_type, None, session)
