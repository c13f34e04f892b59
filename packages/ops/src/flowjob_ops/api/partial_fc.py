"""``flow.distributed_partial_fc_sample``: class sampling for partial-FC training (legacy v0.4)."""
from __future__ import annotations

import numbers

from flowjob_core import Blob, apply
from flowjob_core.trace import scope

from flowjob_ops.api._common import build_error

__all__ = ["distributed_partial_fc_sample"]


def distributed_partial_fc_sample(weight: Blob, label: Blob, num_sample: int,
                                  name: str | None = None) -> tuple[Blob, Blob, Blob]:
    """Sample ``num_sample`` classes of a fully connected layer's ``weight`` for a batch's ``label``: every
    class that occurs in ``label`` (in label order), then random other classes.

    Inside ``flow.scope.placement`` over p devices the classes are split into p equal shards, as legacy split
    the weight over its devices: each shard samples ``num_sample / p`` of its own classes (its labelled ones
    first) and the samples follow each other in shard order.

    Args:
        weight: the class weights, classes on axis 0 (shape (C, ...)).
        label: the batch's class ids, a 1-d integer blob.
        num_sample: how many classes to keep, in [1, C]: at least the distinct labels of a batch.
        name: the op name; default ``DistributedPartialFcSample_<n>``.

    Returns:
        ``(mapped_label, sampled_label, sampled_weight)``: each label's index among the sampled classes
        (label's shape), the sampled class ids (num_sample,) and their weight rows (num_sample, ...). The
        weight's gradient reaches the sampled rows only.
    """
    if isinstance(num_sample, bool) or not isinstance(num_sample, numbers.Integral):
        raise build_error("flow.distributed_partial_fc_sample", f"num_sample must be an int, got {num_sample!r}")
    placement = scope.current_placement()
    shards = placement.device_count if placement is not None else 1
    return tuple(apply("distributed_partial_fc_sample", [weight, label],  # type: ignore[return-value]
                       {"num_sample": int(num_sample), "parallel_num": shards}, name=name))
