"""The op record: inference, gradient rule and a kernel written once against ``xp``, in one place."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from flowjob_core.ir import BlobSpec

if TYPE_CHECKING:
    from flowjob_core.autodiff import GradContext

InferFn = Callable[[Sequence[BlobSpec], dict], Sequence[BlobSpec]]
"""``infer(inputs, attrs) -> outputs``: raise ShapeError (or ValueError) with a plain message."""

KernelBuilder = Callable[["KernelContext"], Callable[..., Any]]
"""Called once per node when a plan is built; returns the step callable ``run(*inputs) -> out | tuple``."""

GradRule = Callable[["GradContext"], Sequence[Any]]
"""Emits graph nodes for the input gradients; returns one Blob or None per input."""


@dataclass(frozen=True)
class OpDef:
    """One op: what it computes, how its shapes follow, how it differentiates, how it runs.

    ``view``: outputs may alias input 0 (reshape); the planner extends that buffer's lifetime.
    ``mutates``: indices of inputs written in place (optimizer updates); such nodes run after
    every other reader of those values in a step.
    ``effect``: dead-code elimination keeps the node even when nothing reads its outputs.
    ``not_differentiable``: the explicit mark for ops without a gradient rule.
    """

    name: str
    infer: InferFn
    kernel: KernelBuilder | None = None
    grad: GradRule | None = None
    not_differentiable: bool = False
    name_prefix: str = ""
    output_names: tuple[str, ...] | None = None
    view: bool = False
    mutates: tuple[int, ...] = ()
    effect: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if self.grad is not None and self.not_differentiable:
            raise ValueError(f"op {self.name!r}: a gradient rule and the not-differentiable mark exclude each other")
        if not self.name_prefix:
            object.__setattr__(self, "name_prefix", "".join(p.capitalize() for p in self.name.split("_")))

    def out_names(self, count: int) -> tuple[str, ...]:
        if self.output_names is not None:
            return self.output_names
        return tuple(f"out_{i}" for i in range(count))


@dataclass
class KernelContext:
    """What a kernel builder may use: the array module, attributes, static specs, preallocated buffers."""

    xp: Any
    backend: Any
    op: str
    node_name: str
    attrs: dict[str, Any]
    inputs: tuple[BlobSpec, ...]
    outputs: tuple[BlobSpec, ...]
    job_type: str = "predict"
    variable: Callable[[str], Any] | None = None
    _out_buffer: Callable[[int], Any] | None = field(default=None, repr=False)
    shared: dict[Any, Any] = field(default_factory=dict, repr=False)
    """One dict per plan for kernels that cooperate (a filter gradient reusing its forward
    convolution's im2col matrix); key entries by op and node name."""

    @property
    def training(self) -> bool:
        return self.job_type == "train"

    def out(self, index: int = 0) -> Any:
        """The buffer planned for output ``index``: reused across steps, shared by values with disjoint lifetimes."""
        if self._out_buffer is not None:
            return self._out_buffer(index)
        spec = self.outputs[index]
        return self.xp.empty(spec.shape, dtype=spec.dtype)

    def workspace(self, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        """A private scratch array for this node, allocated once."""
        return self.xp.empty(tuple(shape), dtype=dtype)

    def rng(self, seed: int | None = None) -> Any:
        return self.backend.make_rng(seed if seed is not None else self.attrs.get("seed"))
