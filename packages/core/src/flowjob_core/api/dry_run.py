"""Running a program's job definitions without running a step (what ``python -m oneflow dump`` uses).

Inside ``with dry_run() as run:`` every global function defined is recorded in
``run.functions``, and calling one raises :class:`JobCalled` instead of planning and running a
step: the caller stops the program there. Jobs are traced from their placeholders'
annotations (static shapes), so no call's arguments are needed to see a job.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from flowjob_core.errors import FlowjobError
from flowjob_core.passes.pipeline import PassContext, run_passes

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction
    from flowjob_core.ir.job import Job

ALL_PASSES = "all"


class JobCalled(BaseException):
    """A global function was called during a dry run. A BaseException, so that a program's own
    ``except Exception`` around its training loop does not swallow it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"global function {name!r} was called during a dry run: no step runs")
        self.name = name


@dataclass
class DryRun:
    functions: list["JobFunction"] = field(default_factory=list)  # in definition order

    def latest(self) -> list["JobFunction"]:
        """The functions defined, a later definition of a name replacing the earlier (as the session does)."""
        by_name: dict[str, "JobFunction"] = {}
        for fn in self.functions:
            by_name[fn.name] = fn
        return list(by_name.values())


_active: contextvars.ContextVar[DryRun | None] = contextvars.ContextVar("flowjob_dry_run", default=None)


@contextlib.contextmanager
def dry_run() -> Iterator[DryRun]:
    run = DryRun()
    token = _active.set(run)
    try:
        yield run
    finally:
        _active.reset(token)


def active() -> DryRun | None:
    """The dry run in progress, if any (``JobFunction`` asks when it is defined and called)."""
    return _active.get()


def pass_names(fn: "JobFunction") -> list[str]:
    """The passes of ``fn``'s session, in the order they run."""
    return [p.name for p in fn.session.registries.passes.ordered()]


def job_after(fn: "JobFunction", after: str | None) -> "Job":
    """``fn``'s traced job (``after`` None), or the job once the pass named ``after`` (or ``"all"``) has run.

    Runs on a copy with the function's own bindings, exactly as planning would; builds no plan.
    """
    traced = fn.ensure_traced()
    if after is None:
        return traced
    session = fn.session
    ctx = PassContext(session, session.registries, session.backend, fn.bindings)
    if after == ALL_PASSES:
        return run_passes(traced, ctx)
    ordered = list(session.registries.passes.ordered())
    names = [p.name for p in ordered]
    if after not in names:
        raise FlowjobError(f"unknown pass {after!r}; the passes, in order: {', '.join(names)} "
                           f"(or {ALL_PASSES!r} for the job as planned)")
    job = traced.copy()
    for spec in ordered:
        spec.run(job, ctx)
        if spec.name == after:
            break
    return job
