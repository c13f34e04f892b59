"""The job IR: placeholders, variables, single-assignment op nodes, returns and recorded intents."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowjob_core.ir.printing import format_job


@dataclass(frozen=True)
class BlobSpec:
    """Static shape and dtype of a value."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.shape}:{self.dtype}"


@dataclass
class Node:
    """One op application. Inputs and outputs are logical blob names (lbns)."""

    op: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    source: str = ""
    # legacy's scope attributes set around the op (flow.experimental.scope.config), by name; unset ones
    # have their legacy default (flowjob_core.config.scope_config)
    scope: tuple[tuple[str, Any], ...] = ()
    # the machine_device_ids ("0:0-1") of the flow.scope.placement it was traced in (autodiff gives a gradient
    # node its forward node's); empty: the job's default placement. A plugin maps them to its ranks.
    placement: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placeholder:
    """A job input: one array fed per call."""

    name: str
    lbn: str
    spec: BlobSpec
    batch_axis: int | None = 0
    param: str = ""  # the Python parameter it belongs to


@dataclass
class VariableDef:
    """A persistent value shared by name across the jobs of a session."""

    name: str
    spec: BlobSpec
    initializer: str = ""  # how it starts, described; the callable itself lives in the session's variable store
    trainable: bool = True
    lbn: str = ""
    regularizer: str | None = None  # the key of its L1/L2 penalty in the function's bindings (the optimizer pass's)
    model_name: str | None = None  # legacy: "weight"/"bias", picked by secondary_lr and bias_l2


@dataclass
class Intent:
    """Something the body asked for that a pass carries out (minimize, watch, watch_diff, ...).

    ``payload`` is data: lbns, names, options, and keys of the global function's bindings for
    the Python objects (handlers, sinks) the pass will need.
    """

    kind: str
    payload: dict[str, Any]
    source: str = ""


@dataclass
class SideOutput:
    """A value copied out of every step and handed, after the step, to the callable that the
    key ``consumer`` names in the global function's :class:`~flowjob_core.ir.bindings.Bindings`
    (a pass adds it with ``ctx.bindings.add(callable)``); ``label`` is what it shows, e.g. the watched lbn."""

    lbn: str
    consumer: str
    label: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.consumer, str):
            # the job is plain data: a callable here would make it uncopyable and unprintable
            raise TypeError(f"SideOutput({self.lbn!r}): consumer must be the key of a callable added with "
                            f"ctx.bindings.add(...), got {type(self.consumer).__name__}")


@dataclass(frozen=True)
class ConfigSnapshot:
    """The function config a job was traced with, frozen: the options set (name, value) sorted by name,
    the nested option sets (``train``) by name, and whether the set counts as set (``train.is_set``: a
    version-0.1 training config). Later changes to the function's config do not reach the job."""

    options: tuple[tuple[str, Any], ...] = ()
    sections: tuple[tuple[str, "ConfigSnapshot"], ...] = ()
    is_set: bool = False

    def get(self, name: str, default: Any = None) -> Any:
        """The value of option ``name``, ``default`` when it was not set."""
        return next((value for key, value in self.options if key == name), default)

    def section(self, name: str) -> "ConfigSnapshot":
        """The nested option set ``name`` (empty when there is none)."""
        return next((snapshot for key, snapshot in self.sections if key == name), ConfigSnapshot())


@dataclass
class Job:
    name: str
    type: str = "predict"
    placeholders: list[Placeholder] = field(default_factory=list)
    variables: dict[str, VariableDef] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    specs: dict[str, BlobSpec] = field(default_factory=dict)
    returns: list[str] = field(default_factory=list)
    intents: list[Intent] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    grad_targets: list[str] = field(default_factory=list)
    side_outputs: list[SideOutput] = field(default_factory=list)
    config: ConfigSnapshot = field(default_factory=ConfigSnapshot)
    # lbn -> how the value lies over the ranks (flowjob_core.ir.layout.Layout): what the body declared
    # (a split variable, blob.with_distribute), then, on several ranks, every value after the boxing pass
    layouts: dict[str, Any] = field(default_factory=dict)
    # node name -> the ranks it runs on, where a plugin mapped the job's placements onto its ranks (several ranks)
    ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # lbn -> the layout the gradient arriving at that value is given (blob.with_gradient_distribute), on several ranks
    gradient_layouts: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        """The job as text, one line per node (see ``flowjob_core.ir.printing``; ``format_job`` given the op
        records and the function's bindings also marks effects and says what the job's keys name)."""
        return format_job(self)

    def producer(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for lbn in node.inputs:
                users.setdefault(lbn, []).append(node)
        return users

    def copy(self) -> "Job":
        """A copy whose lists and dicts can be changed by passes without touching the traced job."""
        return dataclasses.replace(
            self,
            placeholders=list(self.placeholders),
            variables=dict(self.variables),
            nodes=[dataclasses.replace(n, attrs=dict(n.attrs)) for n in self.nodes],
            specs=dict(self.specs),
            returns=list(self.returns),
            intents=list(self.intents),
            losses=list(self.losses),
            grad_targets=list(self.grad_targets),
            side_outputs=list(self.side_outputs),
            layouts=dict(self.layouts),
            ranks=dict(self.ranks),
            gradient_layouts=dict(self.gradient_layouts),
        )
