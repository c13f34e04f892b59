"""``flow.get_variable`` and ``flow.losses.add_loss``: what a job body declares about variables and losses."""
from __future__ import annotations

from typing import Any

import numpy as np

from flowjob_core.ir import distribute as distributions
from flowjob_core.ir import dtypes
from flowjob_core.ir import layout as ir_layout
from flowjob_core.trace import scope
from flowjob_core.trace.blob import Blob
from flowjob_core.errors import FlowjobError, VariableError
from flowjob_core.ir.job import BlobSpec
from flowjob_core.runtime.world import world_of
from flowjob_core.trace.builder import current_builder


def get_variable(name: str, shape: tuple[int, ...] | list[int] | None = None, dtype: Any = None,
                 initializer: Any = None, regularizer: Any = None, trainable: bool | None = None,
                 model_name: str | None = None, random_seed: int | None = None, distribute: Any = None,
                 reuse: bool = True) -> Any:
    """``flow.get_variable``: the same name gives the same variable, within a job and across jobs."""
    builder = current_builder("flow.get_variable")
    if shape is None:
        raise VariableError(f"flow.get_variable({name!r}): shape is required")
    if any(not isinstance(d, (int, np.integer)) or d <= 0 for d in shape):
        raise VariableError(f"flow.get_variable({name!r}): shape must hold positive ints, got {shape!r}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32
    if dt == dtypes.tensor_buffer:
        raise VariableError(f"flow.get_variable({name!r}): a variable holds numbers; flow.tensor_buffer is the "
                            f"dtype of values built in a step (flow.tensor_to_tensor_buffer)")
    if initializer is not None and not callable(initializer):
        initializer = _read_initializer(builder.session, initializer, scope.scoped_name(name))
    if random_seed is not None and initializer is not None and hasattr(initializer, "with_seed"):
        initializer = initializer.with_seed(random_seed)
    full = scope.scoped_name(name)
    layout = None
    if distribute is not None:  # legacy asserted a flow.distribute value: on several ranks a split one is split
        try:
            checked = distributions.checked_for(distribute, tuple(shape), f"flow.get_variable({full!r}): distribute")
        except (TypeError, ValueError) as exc:
            raise VariableError(str(exc)) from None
        layout = ir_layout.from_distribute(checked)
    spec = BlobSpec(tuple(shape), dt)
    shard = None
    if layout is not None and full not in builder.session.variables:  # this rank's piece, over several ranks
        world = world_of(builder.session)
        try:
            shard = ir_layout.shard_of(layout, spec, world.rank, world.size,
                                       f"job {builder.job.name!r}, variable {full!r} ({layout})")
        except ValueError as exc:
            raise VariableError(f"{exc}; a split variable's pieces must have one shape, as legacy's did") from None
    return builder.add_variable(full, spec, initializer, True if trainable is None else bool(trainable),
                                reuse=reuse, regularizer=regularizer, model_name=model_name, layout=layout,
                                shard=shard)


def _read_initializer(session: Any, value: Any, variable: str) -> Any:
    """A plugin's reading of a non-callable initializer (flowjob-ops reads legacy InitializerConf messages)."""
    try:
        init = session.pm.hook.flowjob_read_initializer(value=value, owner=f"variable {variable!r}")
    except ValueError as exc:
        raise VariableError(f"flow.get_variable: {exc}") from None
    if init is None:
        raise VariableError(f"flow.get_variable({variable!r}): the initializer must be callable as "
                            f"init(shape, dtype, rng) or a legacy InitializerConf, got {type(value).__name__}")
    return init


def add_loss(loss: Any) -> None:
    """``flow.losses.add_loss``: mark a blob as a loss of the train job being traced."""
    builder = current_builder("flow.losses.add_loss")
    if builder.job.type != "train":
        raise FlowjobError(
            f"job {builder.job.name!r}: add_loss/minimize needs type='train', this job is {builder.job.type!r}")
    for blob in loss if isinstance(loss, (list, tuple)) else [loss]:
        if not isinstance(blob, Blob):
            raise FlowjobError(f"job {builder.job.name!r}: a loss must be a blob, got {type(blob).__name__}")
        if blob.dtype.kind not in "fiu":  # legacy seeded any numeric loss with ones of its dtype
            raise FlowjobError(f"job {builder.job.name!r}: loss {blob.lbn!r} must be numeric, is {blob.dtype}")
        if blob.lbn not in builder.job.losses:
            builder.job.losses.append(blob.lbn)
