"""Core's graph passes (verify, autodiff, dead-code elimination) and the pipeline that runs all passes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flowjob_core.ir.analysis import observed_values
from flowjob_core.passes.autodiff import differentiate
from flowjob_core.ir import layout
from flowjob_core.ir.bindings import Bindings
from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import Job
from flowjob_core.plugins.host import hookimpl

if TYPE_CHECKING:
    from flowjob_core.plugins.registry import Registries
    from flowjob_core.runtime.session import Session


@dataclass
class PassContext:
    """What the passes of one pipeline run over one job share: the session, and what passes hand on to
    later passes beside the job (the job holds the graph only)."""

    session: "Session"
    registries: "Registries"
    backend: Any = None
    # the global function's table of objects the job names by key (a pass adds its side outputs' consumers)
    bindings: Bindings = field(default_factory=Bindings)
    # autodiff's products: lbn -> its raw gradient's lbn (what watch_diff shows), and variable name -> its
    # gradient scaled by 1/(loss elements) (what the optimizer uses; a pass may replace it, as mpi-allreduce does)
    grads: dict[str, str] = field(default_factory=dict)
    variable_grads: dict[str, str] = field(default_factory=dict)


class VerificationError(FlowjobError):
    """The job IR breaks an invariant (a bug in a pass or plugin, not in the user's program)."""


def verify(job: Job, ctx: PassContext) -> None:
    """Single assignment, defined-before-use, registered ops, and inference that still agrees."""
    ops = ctx.registries.ops
    defined: set[str] = set()
    names: set[str] = set()
    for node in job.nodes:
        where = f"job {job.name!r}, node {node.name!r} ({node.op})"
        if node.name in names:
            raise VerificationError(f"{where}: node name used twice")
        names.add(node.name)
        if node.op not in ops:
            raise VerificationError(f"{where}: op is not registered")
        for lbn in node.inputs:
            if lbn not in defined:
                raise VerificationError(f"{where}: input {lbn!r} is used before it is defined")
        specs = tuple(ops[node.op].infer(tuple(job.specs[i] for i in node.inputs), node.attrs))
        if len(specs) != len(node.outputs):
            raise VerificationError(f"{where}: inference gives {len(specs)} outputs, node has {len(node.outputs)}")
        for lbn, spec in zip(node.outputs, specs):
            if lbn in defined:
                raise VerificationError(f"{where}: {lbn!r} is assigned twice")
            if job.specs.get(lbn) != spec:
                raise VerificationError(f"{where}: {lbn!r} recorded as {job.specs.get(lbn)}, inference gives {spec}")
            defined.add(lbn)
    for lbn in job.returns + [s.lbn for s in job.side_outputs] + job.losses:
        if lbn not in defined:
            raise VerificationError(f"job {job.name!r}: {lbn!r} is used as a result but never defined")
    for lbn, value, what in [*((lbn, v, "value") for lbn, v in job.layouts.items()),
                             *((lbn, v, "the gradient of") for lbn, v in job.gradient_layouts.items())]:
        if lbn not in defined:
            continue  # a value a later pass removed (fusion): its layout is moot
        try:
            layout.check(value, job.specs[lbn], f"job {job.name!r}, {what} {lbn!r}")
        except ValueError as exc:
            raise VerificationError(str(exc)) from None
    placeholder_lbns = [p.lbn for p in job.placeholders]
    if len(set(placeholder_lbns)) != len(placeholder_lbns):
        raise VerificationError(f"job {job.name!r}: a placeholder is listed twice")


def eliminate_dead_code(job: Job, ctx: PassContext) -> None:
    """Drop nodes nothing needs; returns, fetched values, losses, effects and placeholders are kept."""
    ops = ctx.registries.ops
    live = observed_values(job)
    kept = []
    for node in reversed(job.nodes):
        opdef = ops[node.op]
        if opdef.effects.effect or opdef.effects.mutates or node.op == "input" or any(o in live for o in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    kept_ids = {id(n) for n in kept}
    removed = {o for n in job.nodes if id(n) not in kept_ids for o in n.outputs}
    job.nodes = kept
    for lbn in removed:
        job.specs.pop(lbn, None)
        job.layouts.pop(lbn, None)


def run_passes(job: Job, ctx: PassContext) -> Job:
    """Run every registered pass in order on a copy of the traced job.

    In debug mode (``flow.config.enable_debug_mode(True)``) the verifier runs after every pass,
    so an invariant a pass breaks is reported with that pass's name, not at ``verify-final``.
    """
    job = job.copy()
    debug = bool(getattr(getattr(ctx.session, "config", None), "debug_mode", False))
    for spec in ctx.registries.passes.ordered():
        spec.run(job, ctx)
        if debug and spec.run is not verify:
            try:
                verify(job, ctx)
            except VerificationError as exc:
                raise VerificationError(f"after pass {spec.name!r} (from {spec.plugin or 'builtin'!r}): {exc}") from exc
    return job


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    # the phases (flowjob_core.plugins.pass_order.PHASES) order core's passes: no anchors needed
    registry.add("verify", verify, phase="verify")
    registry.add("autodiff", differentiate, phase="differentiate")
    registry.add("dce", eliminate_dead_code, phase="cleanup")
    registry.add("verify-final", verify, phase="finalize")
