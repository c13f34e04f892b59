"""``flow.eager_nccl_all_reduce``: legacy v0.4's all-reduce of a blob over the devices of ``parallel_conf``.

Over one participant the sum is the blob itself, which is what a one-device, one-process run computes here
(an identity node). Over several devices or MPI ranks flowjob sums through its consistent and mirrored views,
not through this call, so it is refused there with that way.
"""
from __future__ import annotations

from flowjob_core import Blob, FlowjobError, apply, current_builder
from flowjob_core.api import flow_config
from flowjob_core.runtime.world import world_of


def eager_nccl_all_reduce(x: Blob, parallel_conf: str, name: str | None = None) -> Blob:
    """``x`` summed over the run's participants: ``x`` itself in a one-device, one-process run."""
    builder = current_builder("flow.eager_nccl_all_reduce")
    if not isinstance(parallel_conf, str):
        raise FlowjobError(f"flow.eager_nccl_all_reduce: parallel_conf must be a str, got {parallel_conf!r}")
    world, devices = world_of(builder.session), flow_config.device_num()
    if world.size > 1 or devices > 1:
        raise FlowjobError(
            f"flow.eager_nccl_all_reduce in job {builder.job.name!r}: this run has {world.size} process(es) with "
            f"{devices} device(s) each; sums over devices come from the views here (a mirrored blob summed by "
            f"flow.math.reduce_sum in a consistent job, or gradients, which are all-reduced for you)")
    return apply("identity", [x], name=name)
