"""Data readers in the consistent view over ranks: each rank reads its own records, so a reader's outputs are
already this rank's rows of the global batch, and the consistent-view pass only has to learn what they stand for.

``flowjob_ofrecord`` shards its readers by the rank and size of the session's ``flowjob_world``, which
flowjob-mpi answers with the MPI world: a reader of ``batch_size`` records traced on rank ``r`` of ``R`` reads
``batch_size / R`` records per step from its contiguous range of the part files, and records its ``rank``
and ``world`` in its attributes. Any source
node (no inputs) whose attributes say ``world == R`` is taken as such a reader: its outputs carry the
batch on axis 0, ``batch_size / R`` rows on every rank. The global shapes of everything they reach are
inferred again here (the job was traced with the rank's rows), so returns, watched values and gradient
weights get their global form exactly as for a split placeholder.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import BlobSpec
from flowjob_core.plan.actual_shapes import DynamicShapeError, reshaped
from flowjob_core.ir.job import Job

from flowjob_mpi.errors import MpiError
from flowjob_mpi.world import World


def sharded_sources(job: Job, w: World) -> dict[str, tuple[BlobSpec, list[int]]]:
    """Each output of a rank-sharded reader: its global spec and every rank's rows."""
    found: dict[str, tuple[BlobSpec, list[int]]] = {}
    for node in job.nodes:
        if node.inputs or "world" not in node.attrs or "rank" not in node.attrs:
            continue
        if node.attrs["world"] != w.size or node.attrs["rank"] != w.rank:
            raise MpiError(f"global function {job.name!r}, op {node.name!r} ({node.op}) at {node.source}: it was "
                           f"traced to read shard {node.attrs['rank']} of {node.attrs['world']}, but this is rank "
                           f"{w.rank} of {w.size}: a reader takes its shard from the session's flowjob_world hook, "
                           f"which another plugin answered for it instead of flowjob-mpi")
        for lbn in node.outputs:
            local = job.specs[lbn]
            if not local.shape:
                raise MpiError(f"global function {job.name!r}, op {node.name!r} ({node.op}): its output {lbn!r} has "
                               f"no batch axis, so the ranks' shards of it cannot be combined")
            rows = local.shape[0]
            found[lbn] = (BlobSpec((rows * w.size, *local.shape[1:]), local.dtype), [rows] * w.size)
    return found


def infer_global(job: Job, ctx: Any, global_specs: dict[str, BlobSpec], sources: set[str]) -> set[str]:
    """``global_specs`` of every value the sources reach, inferred in job order for the global batch (the
    job's own specs being the rank's); returns the reached values."""
    ops = ctx.registries.ops
    reached = set(sources)
    for node in job.nodes:
        if not any(x in reached for x in node.inputs):
            continue
        ins = tuple(global_specs[x] for x in node.inputs)
        where = (f"global function {job.name!r}, op {node.name!r} ({node.op}) at {node.source}, reading the records "
                 f"every rank reads (global input shapes {[s.shape for s in ins]})")
        if ops[node.op].shape.fixed_shape:  # its traced target shape cannot follow other rows
            raise MpiError(f"{where}: its target shape {node.attrs.get('shape')} was fixed when the job was traced "
                           f"for this rank's records, so the global value it stands for is unknown")
        attrs = node.attrs
        if node.op == "reshape":
            local_in = tuple(job.specs[node.inputs[0]].shape)
            try:
                target = reshaped(local_in, ins[0].shape, tuple(job.specs[node.outputs[0]].shape), where)
            except DynamicShapeError as exc:
                raise MpiError(str(exc).replace("dynamic", "global")) from None
            attrs = {**attrs, "shape": target}
        try:
            outs = ops[node.op].infer(ins, attrs)
        except Exception as exc:  # ShapeError and the plain checks ops make
            raise MpiError(f"{where}: the op cannot take the global batch: {exc}") from None
        for lbn, spec in zip(node.outputs, outs):
            global_specs[lbn] = spec
            reached.add(lbn)
    return reached
