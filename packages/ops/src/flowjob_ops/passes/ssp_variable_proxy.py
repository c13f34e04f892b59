"""The ``ssp-variable-proxy`` pass: legacy ``function_config.enable_ssp(True)`` (stale-synchronous parallelism).

Legacy's ``AddSspVariableProxy``, on this IR (phase ``update``, after the optimizer pass, as legacy ran it
after the backward and optimizer ops were made). In a train job, every trainable variable that gets a
gradient is read through an ``ssp_variable_proxy`` node ``<variable>_ssp_variable_proxy``: the forward and
backward ops read the variable as it was ``buffer_size`` steps ago, the update ops write the variable
itself. ``buffer_size`` is ``ssp_num_stages - ssp_stage_id`` of the variable's scope
(``flow.experimental.scope.config(ssp_num_stages=n, ssp_stage_id=i)`` around ``flow.get_variable``), so
stage 0 of 4 computes on weights 4 updates old and the last stage on weights 1 update old.

Legacy placed each stage on its own devices, and the stages ran at once as a pipeline; here the job runs in
one process, step after step, so each stage's staleness is computed exactly, without the speed-up. The
proxy keeps its ring buffer and step counter in two variables, ``<proxy>-SspBuffer`` and ``<proxy>-SspStep``
(not trainable), which checkpoints save with the others. In eager mode the option does nothing, with a
warning, as legacy's eager jobs skipped the rewrite.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import ConfigError
from flowjob_core.config.scope_config import scope_value
from flowjob_core.ir.analysis import value_producers
from flowjob_core.ir.job import BlobSpec, Job
from flowjob_core.ir.naming import train_step_name
from flowjob_core.trace.builder import JobBuilder

from flowjob_ops.passes.lazy_rewrites import skipped_in_eager_mode
from flowjob_ops.passes.node_placement import place_before_readers
from flowjob_ops.records.ssp import SSP_VARIABLE_PROXY

OPTION = "function_config.enable_ssp"


def enabled(job: Job) -> bool:
    get = getattr(job.config, "get", None)
    return job.type == "train" and bool(get("enable_ssp")) if get is not None else False


def buffer_size(job: Job, variable: str, node: Any) -> int:
    """``ssp_num_stages - ssp_stage_id`` of the variable's scope; an error names the variable otherwise."""
    stages, stage = scope_value(node, "ssp_num_stages"), scope_value(node, "ssp_stage_id")
    if stages <= 0 or not 0 <= stage < stages:
        raise ConfigError(
            f"job {job.name!r}: {OPTION}(True) reads trainable variable {variable!r} through a stale-synchronous "
            f"proxy, whose scope must say its stage: flow.experimental.scope.config(ssp_num_stages=n, "
            f"ssp_stage_id=i) with n > 0 and 0 <= i < n around flow.get_variable; it has ssp_num_stages={stages}, "
            f"ssp_stage_id={stage}")
    return int(stages - stage)


def run(job: Job, ctx: Any) -> None:
    if not enabled(job) or skipped_in_eager_mode(job, OPTION):
        return
    ops = ctx.registries.ops
    producers = value_producers(job)
    if any(node.op == SSP_VARIABLE_PROXY.name for node in job.nodes):
        # legacy refused a second application; a proxy the body made already delegates its variable
        raise ConfigError(f"job {job.name!r}: {OPTION}(True) adds the stale-synchronous proxies itself; the body "
                          f"calls flow.experimental.ssp_variable_proxy too")
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    before = len(job.nodes)
    proxies: dict[str, str] = {}  # variable lbn -> the proxy's stale value
    for name in ctx.variable_grads:
        var = job.variables[name]
        if not var.trainable or name == train_step_name(job.name):
            continue
        node = producers[var.lbn]
        size = buffer_size(job, name, node)
        stem = f"{name}_ssp_variable_proxy"
        ring = builder.add_variable(f"{stem}-SspBuffer", BlobSpec((size,) + var.spec.shape, var.spec.dtype), None,
                                    trainable=False)
        step = builder.add_variable(f"{stem}-SspStep", BlobSpec((1,), "int64"), None, trainable=False)
        (value,) = builder.add_op(SSP_VARIABLE_PROXY.name, [builder.blob(var.lbn), ring, step], {},
                                  scoped_name=stem, source=node.source, device=node.device)
        proxies[var.lbn] = value.lbn
    if not proxies:
        return
    added = set(n.name for n in job.nodes[before:])
    for node in job.nodes:
        if node.name in added:
            continue
        writes = {node.inputs[k] for k in ops[node.op].effects.mutates}
        # the update ops write the variable itself (legacy's optimizer-pass ops read its "ref")
        if not writes.intersection(proxies):
            node.inputs = tuple(proxies.get(lbn, lbn) for lbn in node.inputs)
    place_before_readers(job, len(job.nodes) - before)
