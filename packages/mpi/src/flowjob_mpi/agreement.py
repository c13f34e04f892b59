"""Every rank at the same step of the same job, checked before the step's first collective.

A rank that calls ``train_a`` while another calls ``train_b`` (or calls its job once more) would otherwise
join the others' collectives with values of another job: it trains on the sum, or MPI aborts on a size
mismatch. Pass ``mpi-agree`` puts an ``mpi_step_check`` node first in every job that has a collective; its
kernel all-gathers a few bytes per step (the job's name, how many steps of it this rank has run, a digest
of its collectives' shapes), so every rank sees the same answer and all stop together, with an error
naming what each rank ran.

The arrays fed to the consistent view's arguments must be the same on every rank (each then takes its
own rows): the check also compares a fingerprint of each (its dtype, shape and the CRC-32 of its bytes,
one pass at memory speed; ``fingerprint``), and an argument fed differently is named with the ranks that
fed what. ``FLOWJOB_MPI_FEED_CHECK=0`` turns that off (read when the job is planned). In debug mode
(``flow.config.enable_debug_mode(True)``) the check compares SHA-256 digests instead, switch or not.
"""
from __future__ import annotations

import hashlib
import zlib
from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, ShapeError, switches
from flowjob_core.ir.job import Job, Node

from flowjob_mpi.errors import MpiError
from flowjob_mpi.faults import WAITING
from flowjob_mpi.world import world

# every op whose kernel takes part in a collective: the boxing nodes and the pieces of split ops that reduce across
# the ranks (a job of only such nodes still needs the check before them)
COLLECTIVES = ("mpi_allgather", "mpi_allreduce", "mpi_allreduce_start", "mpi_reduce_scatter", "mpi_all_to_all",
               "mpi_sparse_softmax_cross_entropy_class_split", "mpi_softmax_class_split",
               "mpi_log_softmax_class_split", "mpi_softmax_grad_class_split", "mpi_log_softmax_grad_class_split",
               "mpi_softmax_cross_entropy_class_split", "mpi_batch_norm_train_rows_split",
               "mpi_batch_norm_train_grad_rows_split")


class RankMismatchError(MpiError):
    """The ranks of a data-parallel step run different jobs, or different steps of one job."""


def fingerprint(array: Any) -> str:
    """A fed array's fingerprint: dtype, shape and the CRC-32 of its bytes (``float32(4, 3):1c291ca3``)."""
    host = np.ascontiguousarray(array)
    return f"{host.dtype}{host.shape}:{zlib.crc32(host.reshape(-1).view(np.uint8)):08x}"


def digest(array: Any) -> str:
    """A fed array's SHA-256 digest (debug mode), its first 16 hex digits."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


COMPARISONS: dict[str, Callable[[Any], str]] = {"fingerprint": fingerprint, "digest": digest}


class StepAgreement:
    """One job's check: ``check()`` once per step, before its first collective.

    ``feeds`` names the arguments whose arrays ``check`` receives; ``compare`` is how they are compared
    (a key of ``COMPARISONS``)."""

    def __init__(self, comm: Any, rank: int, job: str, layout: str, feeds: Sequence[str] = (),
                 to_host: Callable[[Any], Any] = np.asarray, compare: str = "fingerprint") -> None:
        self.comm, self.rank, self.job, self.layout = comm, rank, job, layout
        self.feeds, self.to_host = tuple(feeds), to_host
        self.summary = COMPARISONS[compare]
        self.steps = 0

    def check(self, *fed: Any) -> None:
        self.steps += 1
        summary, to_host = self.summary, self.to_host
        summaries = tuple(summary(to_host(a)) for a in fed)
        mine = (self.job, self.steps, self.layout)
        WAITING.enter(f"the all-gather checking that every rank runs step {self.steps} of job {self.job!r}")
        everyone = self.comm.allgather((mine, summaries))
        WAITING.leave()
        if any(other != mine for other, _ in everyone):
            ran = "; ".join(f"rank {r}: job {job!r} step {step} (collectives {layout})"
                            for r, ((job, step, layout), _) in enumerate(everyone))
            raise RankMismatchError(
                f"the ranks of a data-parallel step run different things ({ran}); every rank must call the same "
                f"job, with the same shapes, the same number of times (this is rank {self.rank})")
        for k, name in enumerate(self.feeds):
            seen = [s[k] for _, s in everyone]
            if len(set(seen)) > 1:
                raise RankMismatchError(
                    f"global function {self.job!r}, argument {name!r}: the ranks fed different arrays at step "
                    f"{self.steps}: {_fed_by(seen)}; in the consistent view every rank feeds the same global batch "
                    f"and takes its own rows of it (this is rank {self.rank}; FLOWJOB_MPI_FEED_CHECK=0 stops "
                    f"comparing them)")


def _fed_by(seen: list[str]) -> str:
    """``rank(s) [1] fed other arrays than rank 0 (ranks 0, 2: ...; rank 1: ...)``."""
    groups: dict[str, list[int]] = {}
    for rank, value in enumerate(seen):
        groups.setdefault(value, []).append(rank)
    others = [r for r, value in enumerate(seen) if value != seen[0]]
    listed = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {value}"
                       for value, rs in groups.items())
    return f"rank(s) {others} fed other arrays than rank 0 ({listed})"


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not isinstance(attrs.get("job"), str) or not isinstance(attrs.get("layout"), str):
        raise ShapeError("mpi_step_check needs the attributes job and layout (strings)")
    if len(inputs) != len(attrs.get("feeds", ())):
        raise ShapeError(f"mpi_step_check: {len(inputs)} inputs, but feeds names {attrs.get('feeds', ())}")
    if attrs.get("compare", "fingerprint") not in COMPARISONS:
        raise ShapeError(f"mpi_step_check: compare must be one of {sorted(COMPARISONS)}, got {attrs['compare']!r}")
    return []


def _kernel(ctx: KernelContext) -> Callable[..., None]:
    agreement = StepAgreement(world().comm, world().rank, ctx.attrs["job"], ctx.attrs["layout"],
                              ctx.attrs.get("feeds", ()), ctx.backend.to_host, ctx.attrs.get("compare", "fingerprint"))
    return agreement.check


MPI_STEP_CHECK = OpDef("mpi_step_check", _infer, kernel=_kernel, not_differentiable=True,
                       doc="every rank at the same step of the same job (attributes job, layout), else all stop",
                       effects=Effects(effect=True))


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
    compare = "digest" if getattr(ctx.session.config, "debug_mode", False) else \
        "fingerprint" if switches.current().mpi_feed_check else None
    if compare is not None:
        split = {i for n in job.nodes if n.op == "mpi_split" for i in n.inputs}
        fed = [p for p in job.placeholders if p.lbn in split]  # the consistent view's global batches
        inputs, attrs["feeds"], attrs["compare"] = tuple(p.lbn for p in fed), [p.param or p.name for p in fed], compare
    # after the nodes that make what it reads (the feeds), before the first collective
    made = {lbn: i for i, n in enumerate(job.nodes) for lbn in n.outputs}
    first = max((made[lbn] + 1 for lbn in inputs), default=0)
    job.nodes.insert(first, Node("mpi_step_check", "System-MPI-StepCheck", inputs, (), attrs,
                                 collectives[0].device, "flowjob-mpi"))
