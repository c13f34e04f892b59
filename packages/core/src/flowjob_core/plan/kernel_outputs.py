"""A kernel's outputs against its op's inference: the count, shape and dtype each output was planned with.

Inference decided every value's shape and dtype when the job was traced; a kernel (a plugin's, a user
op's) that returns something else would hand the wrong value to the next op, which gets the blame, or
to the caller. The planner wraps each kernel so that its first call checks what it returned and, if all
is well, puts the bare kernel in its place (later steps pay nothing); in debug mode
(``flow.config.enable_debug_mode``, ``enable_numerics_check``) every call is checked. A mismatch is a
:class:`KernelOutputError` naming the job, the op, its source line and the kernel.

A kernel that runs only on some steps and returns None on the others (gradient accumulation's gated
updates) says so with a true ``gated`` attribute; its check waits for a call that returns values.

Values whose extent depends on the data (ops declaring ``dynamic_extent`` and their followers) may be
smaller than planned along an axis; their rank and dtype are still checked, item by item for a
``TensorList`` (``tensor_buffer_to_tensor_list``'s items of differing shapes).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, MutableMapping, Sequence

from flowjob_core.errors import FlowjobError
from flowjob_core.plan.mirrored import TensorList

if TYPE_CHECKING:
    from flowjob_core.ir.job import BlobSpec, Job, Node


class KernelOutputError(FlowjobError, TypeError):
    """A kernel returned values that disagree with its op's shape and dtype inference."""


def _kernel_name(fn: Callable[..., Any]) -> str:
    owner = getattr(fn, "__self__", None)
    target = type(owner) if owner is not None and not isinstance(owner, type) else fn
    module = getattr(target, "__module__", None) or type(fn).__module__
    name = getattr(target, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


def problems(values: Sequence[Any], specs: Sequence["BlobSpec"], *, flexible_extent: bool) -> list[str]:
    """What is wrong with ``values`` against ``specs`` (empty: nothing)."""
    if len(values) != len(specs):
        return [f"it returned {len(values)} value(s), the op has {len(specs)} output(s)"]
    found = []
    for k, (value, spec) in enumerate(zip(values, specs)):
        if type(value) is TensorList and flexible_extent:  # a tensor list of items of their own shapes
            found += [f"output {k} item {problem.removeprefix('output ')}"
                      for problem in problems(list(value), [spec] * len(value), flexible_extent=True)]
            continue
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None:
            found.append(f"output {k} is a {type(value).__name__}, not an array of {spec}")
            continue
        shape = tuple(shape)
        fits = (len(shape) == len(spec.shape) and all(0 <= got <= want for got, want in zip(shape, spec.shape))
                if flexible_extent else shape == spec.shape)
        if not fits or dtype != spec.dtype:
            found.append(f"output {k} is {shape}:{dtype}, inference says {spec}")
    return found


def checked(namespace: MutableMapping[str, Any], name: str, run: Callable[..., Any], job: "Job", node: "Node",
            specs: Sequence["BlobSpec"], *, every_call: bool, flexible_extent: bool,
            gated: bool = False) -> Callable[..., Any]:
    """``run`` (bound as ``namespace[name]`` in a generated step) wrapped in the output check: on its first
    call only (then ``namespace[name]`` becomes ``run`` itself), or on ``every_call``. ``gated``: the kernel's
    trait (``flowjob_core.ir.kernel.Kernel.gated``): a call returning None is a step it sits out, not checked."""
    if not specs:  # an op with side effects only: nothing to compare
        return run

    def run_checked(*args: Any) -> Any:
        out = run(*args)
        if out is None and gated:  # a step it sits out
            return out
        values = tuple(out) if isinstance(out, (tuple, list)) and type(out) is not TensorList else (out,)
        found = problems(values, specs, flexible_extent=flexible_extent)
        if found:
            raise KernelOutputError(
                f"job {job.name!r}, op {node.name!r} ({node.op}) at {node.source or 'an unknown line'}: the kernel "
                f"{_kernel_name(run)} disagrees with the op's inference: {'; '.join(found)}")
        if not every_call:
            namespace[name] = run
        return out

    return run_checked
