"""flowjob-mpi's plugin: in a world of more than one rank, the collective ops, the consistent-view
split, the gradient all-reduce, the check that all ranks run the same step, and the world the core
asks about (checkpoints, machine counts); in a world of one, nothing, so a program runs as it does
without this package."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_mpi import (agreement, allreduce, batch_norm_split, boxing, class_split, consistent, ops, placements,
                         softmax_split, watching)
from flowjob_mpi.world import World, world


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    if world().size > 1:
        for op in (*ops.OPS, *placements.OPS, *softmax_split.OPS, *batch_norm_split.OPS, agreement.MPI_STEP_CHECK,
                   class_split.SPARSE_SOFTMAX_CROSS_ENTROPY_CLASS_SPLIT):
            registry.add(op)


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    if world().size > 1:
        registry.add("mpi-placements", placements.resolve, phase="verify", after="verify", before="mpi-split")
        registry.add("mpi-split", consistent.split_batch, phase="verify", after="verify")
        registry.add("mpi-allreduce", allreduce.reduce_gradients, phase="update", before_if_present="optimizer")
        registry.add("mpi-boxing", boxing.box_layouts, phase="update", before_if_present="optimizer")
        registry.add("mpi-split-slots", boxing.split_slots, phase="update", after_if_present="optimizer")
        registry.add("mpi-watch", watching.globalize_watched, phase="instrument", after_if_present="watch")
        registry.add("mpi-agree", agreement.add_step_check, phase="transform")
        registry.add("mpi-run-placed", placements.run_placed, phase="transform", before="mpi-agree",
                     after_if_present="repeat-acc")


@hookimpl
def flowjob_world() -> World:
    return world()
