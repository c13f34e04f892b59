"""What a kernel builder returns, and the one decision its traits take part in.

A builder (``OpDef.kernel``, a backend's override) returns the step callable ``run(*inputs)``, or, where the
kernel has traits the planner must know, a ``Kernel`` holding ``run`` with them. The planner unwraps it once per
node (``kernel_of``): the generated step calls ``run`` itself. Whether a recorded step runs the node live is
decided here only (``runs_live``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from flowjob_core.ir.opdef import OpDef


@dataclass(frozen=True)
class Kernel:
    """A step callable with its traits.

    ``run``: the step callable, ``run(*input_arrays) -> output | tuple | None``.
    ``host_state``: the kernel's own word on host state (``Effects.host_state``), which overrides its record's
    mark and its builder's random stream (``runs_live``): True, it decides or keeps state on the host each call (a
    gate reading a counter back); False, it keeps on the device what the record's kernel keeps on the host (a
    random stream whose counter lives in device memory); None (the default), it says nothing.
    ``gated``: on some calls it runs nothing and returns None instead of its outputs (gradient accumulation's
    micro-batches): the output check waits for a call that returns them.

    Calling it calls ``run``, for code that runs a built kernel directly (tests, a wrapper around it).
    """

    run: Callable[..., Any]
    host_state: bool | None = None
    gated: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.run, Kernel):  # a kernel wrapping a kernel: one level, the traits of the outer
            object.__setattr__(self, "run", self.run.run)
        if not callable(self.run):
            raise TypeError(f"Kernel.run must be callable, got {self.run!r}")

    def __call__(self, *args: Any) -> Any:
        return self.run(*args)

    def around(self, run: Callable[..., Any]) -> "Kernel":
        """This kernel's traits on ``run``, a function that calls this one (a check around it)."""
        return dataclasses.replace(self, run=run)


TRAITS = ("host_state", "gated")
"""``Kernel``'s traits, which a step function once carried as attributes."""


def kernel_of(built: Callable[..., Any] | Kernel) -> Kernel:
    """What a builder returned, as a ``Kernel``: a bare function is a kernel with no traits. A function carrying
    a trait as an attribute (``run.host_state = False``, the form before ``Kernel``) is refused, since nothing
    reads it any more: the trait would be dropped without a word."""
    if isinstance(built, Kernel):
        return built
    stale = [name for name in TRAITS if name in getattr(built, "__dict__", {})]
    if stale:
        said = ", ".join(f"{name}={getattr(built, name)!r}" for name in stale)
        raise TypeError(f"the kernel function {getattr(built, '__qualname__', built)!r} carries {said} as "
                        f"attributes, which are not read: return flowjob_core.Kernel(run, {said}) instead")
    return Kernel(built)


def runs_live(opdef: "OpDef", kernel: Kernel, drew_rng: bool) -> bool:
    """Whether a backend that records a step and replays it (CUDA graphs, ``flowjob_core.plan.pieces``) runs this
    node live every step, between the recorded pieces: the one place that decides it.

    ``cpu_only`` nodes always are (their placement is the host's). Otherwise the kernel's own ``host_state``
    decides where it gives one: False for a backend's kernel that keeps on the device what the record keeps on
    the host, and for a collective enqueued on a device stream (flowjob-mpi's NCCL boxing), which the recording
    keeps in the step's order although its op is ``ordered``. Else ``ordered`` nodes are live, and so is a node
    whose record marks ``Effects.host_state`` or whose builder drew a random stream on the host (``drew_rng``,
    ``KernelContext.rng``)."""
    effects = opdef.effects
    if effects.cpu_only:
        return True
    if kernel.host_state is not None:
        return kernel.host_state
    return effects.ordered or effects.host_state or drew_rng
