"""The numerics check: a step stops at the first op whose output holds NaN or Inf.

Turned on for a session by ``flow.config.enable_numerics_check(True)`` or the environment switch
``FLOWJOB_NUMERICS_CHECK=1``, or for one global function by
``function_config().enable_numerics_check(True)`` (which overrides the session's choice); read when the
job is planned (its first call). Legacy's ``flow.config.enable_debug_mode`` does not turn it on: legacy's
debug mode did not check values, and programs running in it fill with ``-inf`` on purpose.

An infinity is an error only where it starts: an op may pass on the infinities its inputs hold (a
``where`` choosing a ``-inf`` fill, a reshape of a mask), and an op whose record declares
``OpDef.compute.intended_inf`` (a causal mask's ``-inf`` fill, ``-inf`` padding before a softmax, a constant of
``-inf``) may make them. NaN always stops the step. The planner then wraps each kernel of a floating output in
:func:`checked` and the step in :func:`checked_feeds`, so a fed argument holding NaN is named
before any op runs. Off, nothing is wrapped: the generated step function is the plain one.

The planner learns the choice through :func:`planning`, a context the global function opens
around building its plan, so ``build_plan`` keeps its signature; a plan built outside it follows
the job's own option.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import TYPE_CHECKING, Any, Callable, Iterator

from flowjob_core import switches
from flowjob_core.errors import FlowjobError

if TYPE_CHECKING:
    from flowjob_core.config.function_config import FunctionConfig, SessionConfig
    from flowjob_core.ir.job import Job, Node

OPTION = "enable_numerics_check"
SWITCHES = f"flow.config.enable_numerics_check, FLOWJOB_NUMERICS_CHECK or function_config.{OPTION}"
_ACTIVE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("flowjob_numerics_check", default=None)
_EVERY_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("flowjob_outputs_every_call", default=False)


class NumericsError(FlowjobError, ArithmeticError):
    """A value of a step holds NaN or Inf while the numerics check is on; names the job, op and source line."""


def session_wanted(session_config: "SessionConfig") -> bool:
    """The session's choice: ``flow.config.enable_numerics_check`` when called, else ``FLOWJOB_NUMERICS_CHECK``."""
    own = getattr(session_config, "numerics_check", None)
    if own is not None:
        return bool(own)
    return switches.current().numerics_check


def wanted(session_config: "SessionConfig", function_config: "FunctionConfig") -> bool:
    """The function's own option when it set one, else the session's choice."""
    own = function_config.get(OPTION)
    if own is not None:
        return bool(own)
    return session_wanted(session_config)


@contextlib.contextmanager
def planning(on: bool, outputs_every_call: bool = False) -> Iterator[None]:
    """Plans built inside check their values when ``on``, and their kernels' outputs against inference on
    every call when ``outputs_every_call`` (debug mode) or ``on``."""
    token = _ACTIVE.set(on)
    every = _EVERY_CALL.set(outputs_every_call)
    try:
        yield
    finally:
        _EVERY_CALL.reset(every)
        _ACTIVE.reset(token)


def outputs_every_call() -> bool:
    """Whether the enclosing :func:`planning` asks for the kernel output check on every call (debug mode)."""
    return _EVERY_CALL.get()


def active(job: "Job") -> bool:
    """Whether a plan of ``job`` built now checks its values: the choice of the enclosing :func:`planning`,
    else the job's own ``enable_numerics_check`` (plans built elsewhere, such as shape specialisations)."""
    on = _ACTIVE.get()
    if on is not None:
        return on
    get = getattr(job.config, "get", None)
    return bool(get(OPTION)) if get is not None else False


def _count(xp: Any, value: Any) -> str:
    nan = int(xp.count_nonzero(xp.isnan(value)))
    inf = int(xp.count_nonzero(xp.isinf(value)))
    return f"{nan} NaN and {inf} Inf among {value.size} values"


def _floating(spec: Any) -> bool:
    return spec.dtype.kind in "fc"


def checked(run: Callable[..., Any], xp: Any, job: "Job", node: "Node", mutates: tuple[int, ...] = (),
            intended_inf: bool = False) -> Callable[..., Any]:
    """``run`` followed by a finiteness check of each floating output and of each floating input it writes in
    place (``mutates``: an optimizer update's variable, whose overflow would otherwise show only when the next
    step reads it); ``run`` itself if it has neither. An Inf is let through where the op's record declares it
    makes them on purpose (``intended_inf``) or where a floating input already held one (it started earlier,
    where it was allowed)."""
    specs = [job.specs[o] for o in node.outputs]
    watched = [k for k, s in enumerate(specs) if _floating(s)]
    written = [i for i in mutates if i < len(node.inputs) and _floating(job.specs[node.inputs[i]])]
    if not watched and not written:
        return run
    single = len(node.outputs) == 1
    isfinite, isnan, isinf = xp.isfinite, xp.isnan, xp.isinf
    # the inputs an Inf may have come from (not those written in place: they hold what the op made)
    sources = [i for i, lbn in enumerate(node.inputs) if _floating(job.specs[lbn]) and i not in mutates]

    def inf_allowed(args: tuple[Any, ...] | None) -> bool:
        return intended_inf or (args is not None and any(bool(isinf(args[i]).any()) for i in sources))

    def check(value: Any, what: str, args: tuple[Any, ...] | None) -> None:
        if not bool(isfinite(value).all()):
            if not bool(isnan(value).any()) and inf_allowed(args):
                return
            raise NumericsError(
                f"job {job.name!r}, op {node.name!r} ({node.op}) at {node.source or 'an unknown line'}: {what} "
                f"{_count(xp, value)} (numerics check on: {SWITCHES})")

    def run_checked(*args: Any) -> Any:
        out = run(*args)
        for i in written:
            check(args[i], f"it wrote {node.inputs[i]!r} in place, which now holds", None)
        if out is None:  # a gated kernel's step off (gradient accumulation), or an update with no outputs
            return out
        values = (out,) if single else out
        for k in watched:
            check(values[k], f"output {node.outputs[k]!r} holds", args)
        return out

    return run_checked


def checked_feeds(step: Callable[[list[Any]], Any], xp: Any, job: "Job") -> Callable[[list[Any]], Any]:
    """``step`` that first checks each floating fed array, naming the argument a bad one was fed to."""
    watched = [(i, p) for i, p in enumerate(job.placeholders) if _floating(p.spec)]
    if not watched:
        return step
    isfinite = xp.isfinite

    def step_checked(feeds: list[Any]) -> Any:
        for i, p in watched:
            value = feeds[i]
            if not bool(isfinite(value).all()):
                what = f"argument {p.param!r}" if p.param else f"input {p.name!r}"
                raise NumericsError(
                    f"job {job.name!r}, {what}: the fed array holds {_count(xp, value)} (numerics check on: "
                    f"{SWITCHES})")
        return step(feeds)

    return step_checked
