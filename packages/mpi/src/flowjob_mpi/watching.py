"""Pass ``mpi-watch`` (phase ``instrument``, after ``watch``): what ``flow.watch`` and ``flow.watch_diff``
hand to their handlers is the global value, as the returns are. A watched value that carries the batch
is all-gathered, one the batch was reduced away from is all-reduced (``consistent``); a watched
gradient follows its blob: split with it (each rank's rows weighted first when the loss averages the
batch: a rank's seed is 1/n, one process's 1/N), or, for a variable or another value the batch does
not split, summed over ranks with the weight that makes the ranks' raw gradients (the loss seeded
with ones) one process's. Handlers run on every rank; ranks other than 0 print nothing.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import SideOutput
from flowjob_core.ir.job import Job
from flowjob_core.trace.builder import JobBuilder

from flowjob_mpi.consistent import _Forms

DIFF = ":diff"


def globalize_watched(job: Job, ctx: Any) -> None:
    """The pass: see the module docstring."""
    forms: _Forms | None = getattr(ctx, "flowjob_mpi_forms", None)
    if forms is None or not job.side_outputs:
        return
    producers = job.producer()
    builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
    for index, side in enumerate(job.side_outputs):
        fetch = producers.get(side.lbn)
        if fetch is None or fetch.op != "fetch":
            continue  # not a watch's copy
        diff = side.label.endswith(DIFF)
        blob = side.label[:-len(DIFF)] if diff else fetch.inputs[0]
        if blob not in forms.global_specs:
            continue
        form = forms.of(blob)
        stem = builder.local_name(f"{fetch.name}-mpi")
        if form.kind == "split":
            piece = builder.blob(side.lbn)
            weight = forms.raw_gradient_weight() if diff else 1.0
            if weight != 1.0:  # a rank's rows under an averaged loss: its 1/n seed becomes the global 1/N
                (piece,) = builder.add_op("scalar_mul", [piece], {"scalar": weight},
                                          scoped_name=builder.local_name(f"{fetch.name}-mpi_weight"),
                                          source=fetch.source)
            (whole,) = builder.add_op("mpi_allgather", [piece],
                                      {"axis": form.axis, "counts": forms.counts(blob, form.axis)},
                                      scoped_name=stem, source=fetch.source)
        elif diff:
            (whole,) = builder.add_op("mpi_allreduce", [builder.blob(side.lbn)],
                                      {"weight": forms.raw_gradient_weight()}, scoped_name=stem, source=fetch.source)
        elif form.kind in ("mean", "sum"):
            weight = form.fraction if form.kind == "mean" else 1.0
            (whole,) = builder.add_op("mpi_allreduce", [builder.blob(side.lbn)], {"weight": weight},
                                      scoped_name=stem, source=fetch.source)
        else:
            continue  # the same on every rank
        job.side_outputs[index] = SideOutput(whole.lbn, side.consumer, side.label)
