"""Every rank at the same step of the same job, checked before the step's first collective.

A rank that calls ``train_a`` while another calls ``train_b`` (or calls its job once more) would otherwise
join the others' collectives with values of another job: it trains on the sum, or MPI aborts on a size
mismatch. Pass ``mpi-agree`` puts an ``mpi_step_check`` node first in every job that has a collective; its
kernel all-gathers a few bytes per step (the job's name, how many steps of it this rank has run, a digest
of its collectives' shapes), so every rank sees the same answer and all stop together, with an error
naming what each rank ran.

In debug mode (``flow.config.enable_debug_mode(True)``) the check also reads the arrays fed to the
consistent view's arguments, which every rank must feed alike (each then takes its own rows): a digest of
each goes into the all-gather, and an argument fed differently is named. Off, nothing compares them: each
rank trains on its rows of what it was fed.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, KernelContext, OpDef, ShapeError
from flowjob_core.ir.job import Job, Node

from flowjob_mpi.errors import MpiError
from flowjob_mpi.faults import WAITING
from flowjob_mpi.world import world

COLLECTIVES = ("mpi_allgather", "mpi_allreduce", "mpi_allreduce_start")


class RankMismatchError(MpiError):
    """The ranks of a data-parallel step run different jobs, or different steps of one job."""


class StepAgreement:
    """One job's check: ``check()`` once per step, before its first collective."""

    def __init__(self, comm: Any, rank: int, job: str, layout: str, feeds: Sequence[str] = (),
                 to_host: Callable[[Any], Any] = np.asarray) -> None:
        self.comm, self.rank, self.job, self.layout = comm, rank, job, layout
        self.feeds, self.to_host = tuple(feeds), to_host
        self.steps = 0

    def check(self, *fed: Any) -> None:
        self.steps += 1
        digests = tuple(hashlib.sha256(np.ascontiguousarray(self.to_host(a)).tobytes()).hexdigest()[:16]
                        for a in fed)
        mine = (self.job, self.steps, self.layout)
        WAITING.enter(f"the all-gather checking that every rank runs step {self.steps} of job {self.job!r}")
        everyone = self.comm.allgather((mine, digests))
        WAITING.leave()
        if any(other != mine for other, _ in everyone):
            ran = "; ".join(f"rank {r}: job {job!r} step {step} (collectives {layout})"
                            for r, ((job, step, layout), _) in enumerate(everyone))
            raise RankMismatchError(
                f"the ranks of a data-parallel step run different things ({ran}); every rank must call the same "
                f"job, with the same shapes, the same number of times (this is rank {self.rank})")
        for k, name in enumerate(self.feeds):
            seen = [d[k] for _, d in everyone]
            if len(set(seen)) > 1:
                raise RankMismatchError(
                    f"global function {self.job!r}, argument {name!r}: the ranks fed different arrays at step "
                    f"{self.steps} (digests by rank: {seen}); in the consistent view every rank feeds the same "
                    f"global batch and takes its own rows of it (debug mode compares them; this is rank {self.rank})")


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not isinstance(attrs.get("job"), str) or not isinstance(attrs.get("layout"), str):
        raise ShapeError("mpi_step_check needs the attributes job and layout (strings)")
    if len(inputs) != len(attrs.get("feeds", ())):
        raise ShapeError(f"mpi_step_check: {len(inputs)} inputs, but feeds names {attrs.get('feeds', ())}")
    return []


def _kernel(ctx: KernelContext) -> Callable[..., None]:
    agreement = StepAgreement(world().comm, world().rank, ctx.attrs["job"], ctx.attrs["layout"],
                              ctx.attrs.get("feeds", ()), ctx.backend.to_host)
    return agreement.check


MPI_STEP_CHECK = OpDef("mpi_step_check", _infer, kernel=_kernel, not_differentiable=True, effect=True,
                       doc="every rank at the same step of the same job (attributes job, layout), else all stop")


def _signature(job: Job, node: Node) -> tuple:
    """What every rank's node must agree on: the summed gradients' shapes; for a gather, which holds each
    rank's own rows (their counts differ when the batch does not split evenly), the rows of all ranks."""
    dtypes = [str(job.specs[i].dtype) for i in node.inputs]
    if node.op == "mpi_allgather":
        return node.op, dtypes, node.attrs.get("axis"), list(node.attrs.get("counts", ()))
    return node.op, dtypes, [job.specs[i].shape for i in node.inputs]


def add_step_check(job: Job, ctx: Any) -> None:
    """The pass ``mpi-agree``: ``mpi_step_check`` first in a job that has a collective."""
    collectives = [n for n in job.nodes if n.op in COLLECTIVES]
    if world().size == 1 or not collectives:
        return
    layout = repr([_signature(job, n) for n in collectives])
    attrs: dict[str, Any] = {"job": job.name, "layout": hashlib.sha256(layout.encode()).hexdigest()[:16]}
    inputs: tuple[str, ...] = ()
    if getattr(ctx.session.config, "debug_mode", False):
        split = {i for n in job.nodes if n.op == "mpi_split" for i in n.inputs}
        fed = [p for p in job.placeholders if p.lbn in split]  # the consistent view's global batches
        inputs, attrs["feeds"] = tuple(p.lbn for p in fed), [p.param or p.name for p in fed]
    # after the nodes that make what it reads (the feeds), before the first collective
    made = {lbn: i for i, n in enumerate(job.nodes) for lbn in n.outputs}
    first = max((made[lbn] + 1 for lbn in inputs), default=0)
    job.nodes.insert(first, Node("mpi_step_check", "System-MPI-StepCheck", inputs, (), attrs,
                                 collectives[0].device, "flowjob-mpi"))
