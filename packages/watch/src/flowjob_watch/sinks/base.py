"""The sink contract and how ``flow.watch(..., sink=...)`` picks one.

A sink receives each watched value once per step: ``consume(value, blob_def, diff=...)``,
where ``value`` is a host ndarray (a ``PerDevice`` list after a step run on several devices:
``logical(value, blob_def)`` merges it) and ``blob_def`` the watched symbolic blob (for a
gradient, the forward blob). ``end_step(job)`` runs once per step after the sink's last
value of that job's step. Errors a sink raises surface at the session's next synchronous point.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core import FlowjobError, PluginError
from flowjob_core.plan.mirrored import PerDevice

Consumer = Callable[[Any, Any], None]  # the registry contract: consume(value, blob_def)


class Sink:
    """Base of the built-in sinks; subclass it (or register a factory returning a plain callable)."""

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        raise NotImplementedError  # each sink implements it

    def end_step(self, job: str) -> None:
        """Called once per step of ``job``, after this sink's last value of that step."""

    def __call__(self, value: Any, blob_def: Any) -> None:
        self.consume(value, blob_def, diff=False)


def logical(value: Any, blob_def: Any) -> Any:
    """The value as one array (device pieces concatenated on the blob's batch axis)."""
    if type(value) is PerDevice:
        return value.merged(getattr(blob_def, "batch_axis", None), getattr(blob_def, "lbn", "a watched value"))
    return value


def label(blob_def: Any, diff: bool) -> str:
    """The key a sink files a value under: the lbn, with ``:diff`` for a gradient."""
    return f"{blob_def.lbn}:diff" if diff else blob_def.lbn


def resolve(registries: Any, sink: Any, target: Any, options: dict[str, Any], what: str) -> Any:
    """The sink a watch call asked for: a registered name, a sink object, or the legacy handler/prompt."""
    if sink is None:
        if isinstance(target, Sink):
            _no_options(options, what)
            return target
        sink = "callback"
    if isinstance(sink, str):
        try:
            factory = registries.watch_sinks.get(sink)
        except PluginError as exc:
            raise FlowjobError(f"{what}: {exc}") from None
        try:
            return factory(target, **options)
        except FlowjobError as exc:
            raise type(exc)(f"{what}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise FlowjobError(f"{what}: sink {sink!r} cannot be made from {target!r} and {options}: {exc}") from None
    if target is not None:
        raise FlowjobError(f"{what}: give either a handler or sink=, not both")
    _no_options(options, what)
    if isinstance(sink, Sink) or callable(sink):
        return sink
    raise FlowjobError(f"{what}: sink must be a registered name, a flowjob_watch.sinks.Sink or a "
                       f"callable(value, blob_def), got {sink!r}")


def _no_options(options: dict[str, Any], what: str) -> None:
    if options:
        raise FlowjobError(f"{what}: options {sorted(options)} apply to a sink given by name (sink='...')")


def bind(sink: Any, diff: bool) -> Consumer:
    """The ``(value, blob_def)`` consumer of one watch: a Sink learns whether it sees a gradient."""
    if isinstance(sink, Sink):
        consume = sink.consume
        return lambda value, blob_def: consume(value, blob_def, diff=diff)
    return sink
