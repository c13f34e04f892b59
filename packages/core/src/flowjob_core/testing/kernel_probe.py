"""Kernel contracts the kit checks while it runs an op: inputs are never written, outputs are fresh.

A kernel gets its inputs as arrays it must not change (a plan hands the same buffer to every
reader) and writes its result into the buffer the planner gave it (``ctx.out``), never
returning an input or a view of one unless the op declares ``view=True`` (outputs may alias
input 0). ``ContractKernels`` is a kernel registry view for one probe job: it wraps the kernel
of the op under test with these checks, and in reference mode hands out the op's own kernel
(``OpDef.kernel``) instead of any override a plugin registered through ``flowjob_add_kernels``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, cast

import numpy as np

from flowjob_core.errors import FlowjobError
from flowjob_core.ir.kernel import kernel_of
from flowjob_core.ir.opdef import KernelBuilder, KernelContext, OpDef
from flowjob_core.plugins.registry import ANY_BACKEND, KernelRegistry, Registries

READ_ONLY_MESSAGES = ("read-only", "not writeable", "not writable")


class KernelContractError(FlowjobError):
    """A kernel broke the kernel contract (wrote into an input, returned an input's memory)."""


def override_tags(kernels: KernelRegistry, op: str, backend: str) -> list[str]:
    """The tags under which a plugin overrides ``op``'s kernel for ``backend`` (its own tag or ``*``)."""
    return [tag for tag in (backend, ANY_BACKEND) if op in kernels.overrides(tag)]


class ContractKernels:
    """The registry's kernels, with the kernel of ``op`` checked at every call (see the module doc).

    ``reference=True``: ``op`` runs its own kernel (``OpDef.kernel``), whatever overrides exist.
    """

    def __init__(self, kernels: KernelRegistry, op: str, *, reference: bool = False) -> None:
        self._kernels = kernels
        self._op = op
        self._reference = reference

    def lookup(self, op: OpDef, backend: str) -> KernelBuilder | None:
        builder = self._kernels.lookup(op, backend)
        if op.name != self._op:
            return builder
        if self._reference and op.kernel is not None:
            builder = op.kernel
        return None if builder is None else _checked(op, builder)

    def overrides(self, backend: str) -> list[str]:
        return self._kernels.overrides(backend)


def with_contract_kernels(registries: Registries, op: str, *, reference: bool = False) -> Registries:
    """A shallow copy of ``registries`` whose kernels are ``ContractKernels`` for ``op`` (nothing is changed)."""
    # the planner and the kit use a kernel registry through lookup() and overrides() only
    contract = cast(KernelRegistry, ContractKernels(registries.kernels, op, reference=reference))
    return dataclasses.replace(registries, kernels=contract)


def _shares_memory(xp: Any, a: Any, b: Any) -> bool:
    if a is b:
        return True
    if not (hasattr(a, "shape") and hasattr(b, "shape")):
        return False
    if xp is np:
        return bool(np.shares_memory(a, b))
    # a device array module: compare the arrays' address bounds. CuPy's exact shares_memory compares the
    # addresses a kernel sees for each element, which for 0-d arrays are copies (unrelated arrays "share")
    check = getattr(xp, "may_share_memory", None)
    return bool(check(a, b)) if check is not None else False


def _checked(op: OpDef, builder: KernelBuilder) -> KernelBuilder:
    def build(ctx: KernelContext) -> Callable[..., Any]:
        kernel = kernel_of(builder(ctx))
        run, xp, backend = kernel.run, ctx.xp, ctx.backend

        def checked(*args: Any) -> Any:
            before = [_snapshot(backend.to_host(a)) if hasattr(a, "shape") else None for a in args]
            try:
                result = run(*args)
            except ValueError as exc:
                if any(m in str(exc) for m in READ_ONLY_MESSAGES):
                    raise KernelContractError(
                        f"op {op.name!r} (node {ctx.node_name!r}): the kernel writes into an input: {exc} (the kit "
                        f"feeds inputs read-only; write results into ctx.out(k))") from exc
                raise
            outputs = result if isinstance(result, tuple) else (result,)
            for k, out in enumerate(outputs):
                for i, arg in enumerate(args):
                    if op.effects.view and i == 0:
                        continue  # a view op's outputs may alias input 0
                    if _shares_memory(xp, out, arg):
                        raise KernelContractError(
                            f"op {op.name!r} (node {ctx.node_name!r}): output {k} shares memory with input {i}: a "
                            f"kernel returns fresh results (ctx.out(k)), not its inputs (an op whose outputs alias "
                            f"input 0 declares view=True)")
            for i, (arg, old) in enumerate(zip(args, before)):
                if old is None or i in op.effects.mutates:
                    continue
                if not _unchanged(backend.to_host(arg), old):
                    raise KernelContractError(
                        f"op {op.name!r} (node {ctx.node_name!r}): the kernel changed its input {i} (inputs are "
                        f"read by every consumer; an op that updates an input in place declares it in mutates)")
            return result

        return kernel.around(checked)

    return build


def _snapshot(value: Any) -> Any:
    """A copy of an input to compare with after the kernel ran; a tensor buffer's: a copy of each element."""
    value = np.asarray(value)
    if value.dtype == object:
        return [np.array(e, copy=True) for e in value.reshape(-1)]
    return np.array(value, copy=True)


def _unchanged(value: Any, old: Any) -> bool:
    value = np.asarray(value)
    if isinstance(old, list):
        return len(old) == value.size and all(
            np.shape(e) == o.shape and np.array_equal(np.asarray(e), o, equal_nan=o.dtype.kind in "fc")
            for e, o in zip(value.reshape(-1), old))
    return np.array_equal(value, old, equal_nan=True)
