"""Pass ``mpi-allreduce`` (phase ``update``, before ``optimizer``): every variable gradient the
optimizer will read is summed over ranks first, each rank's weighted by its share of the batch
(``consistent.WEIGHT_INTENT``), so every rank applies the same global gradient and its variables
stay bitwise equal to the other ranks'.

Gradients travel in buckets of at most ``BUCKET_BYTES``, filled in the order autodiff finished them:
``mpi_allreduce_start`` (placed right after the bucket's last gradient) scales them into one host
buffer and starts ``MPI_Iallreduce`` (``MPI_IN_PLACE``); ``mpi_allreduce_wait`` (at the end of the
backward pass, before the optimizer's updates) waits and hands out the sums, so the backward ops in
between run while the bucket travels.
"""
from __future__ import annotations

from typing import Any

from flowjob_core.ir.job import Job
from flowjob_core.trace.builder import JobBuilder

from flowjob_mpi.boxing import laid_out
from flowjob_mpi.placements import placed
from flowjob_mpi.consistent import WEIGHT_INTENT
from flowjob_mpi.world import world

BUCKET_BYTES = 4 << 20


def reduce_gradients(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    if world().size == 1 or job.type != "train" or not ctx.variable_grads or laid_out(job) or placed(job):
        return  # a job laid out by the boxing pass computes each gradient whole or as its variable's shard
    weights = [i.payload["weight"] for i in job.intents if i.kind == WEIGHT_INTENT]
    # without a split placeholder every rank computed the same gradient: averaging keeps it
    weight = weights[0] if weights else 1.0 / world().size
    producers = job.producer()
    sources = [(name, *_raw_gradient(job, ctx, producers, name, lbn)) for name, lbn in ctx.variable_grads.items()]
    ready = {lbn: i for i, node in enumerate(job.nodes) for lbn in node.outputs}
    sources.sort(key=lambda item: ready.get(item[1], -1))
    buckets: list[list[tuple[str, str, float]]] = []
    size = 0
    for name, lbn, factor in sources:
        spec = job.specs[lbn]
        if buckets and size + spec.nbytes <= BUCKET_BYTES and job.specs[buckets[-1][0][1]].dtype == spec.dtype:
            buckets[-1].append((name, lbn, factor))
            size += spec.nbytes
        else:
            buckets.append([(name, lbn, factor)])
            size = spec.nbytes
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    for k, bucket in enumerate(buckets):
        name = builder.local_name(f"System-MPI-AllReduce-{k}")
        (token,) = builder.add_op("mpi_allreduce_start", [builder.blob(lbn) for _, lbn, _ in bucket],
                                  {"weights": [weight * factor for _, _, factor in bucket]}, scoped_name=name,
                                  source="flowjob-mpi")
        # job order is the schedule: the start goes right after its last gradient is made, so the rest of
        # the backward pass runs while the bucket travels; the wait stays at the end, before the updates
        start = job.nodes.pop()
        job.nodes.insert(max(ready.get(lbn, -1) for _, lbn, _ in bucket) + 1, start)
        ready = {lbn: i for i, node in enumerate(job.nodes) for lbn in node.outputs}
        specs = [job.specs[lbn] for _, lbn, _ in bucket]
        outs = builder.add_op("mpi_allreduce_wait", [token],
                              {"start": name, "shapes": [s.shape for s in specs], "dtype": str(specs[0].dtype)},
                              scoped_name=f"{name}-wait", source="flowjob-mpi")
        for (var, _, _), out in zip(bucket, outs):
            ctx.variable_grads[var] = out.lbn


def _raw_gradient(job: Job, ctx: Any, producers: dict[str, Any], name: str, lbn: str) -> tuple[str, float]:
    """The variable's gradient as autodiff made it, and the 1/(loss elements) factor its ``scalar_mul``
    applies at the end of the backward pass: the start scales by it instead, so it can go earlier."""
    raw = ctx.grads.get(job.variables[name].lbn)
    node = producers.get(lbn)
    if node is not None and node.op == "scalar_mul" and node.inputs == (raw,):
        return raw, float(node.attrs["scalar"])
    return lbn, 1.0
