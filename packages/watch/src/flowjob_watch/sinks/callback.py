"""The ``callback`` sink: the legacy handler (one parameter, converted by its annotation) or a printed prompt."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from flowjob_core import FlowjobError, get_default_session, maybe_builder

from flowjob_watch.sinks.base import Sink, logical


def _registries() -> Any:
    builder = maybe_builder()  # sinks are made while a job body is traced
    return builder.registries if builder is not None else get_default_session().registries


def converter_for(annotation: Any, what: str) -> Callable[[Any, Any], Any]:
    """How a handler's parameter annotation turns a host value into what the handler receives."""
    convert = _registries().result_kinds.value_converter(annotation)
    if convert is not None:
        return convert
    if annotation is inspect.Parameter.empty:
        return logical  # no result-kind plugin installed: the plain ndarray
    raise FlowjobError(f"{what}: parameter annotation {annotation!r} is not supported; "
                       f"use tp.Numpy, tp.ListNumpy, tp.ListListNumpy or none")


class PrintSink(Sink):
    """``flow.watch(x)`` / ``flow.watch(x, "prompt")``: print the prompt line (if any), then the value."""

    def __init__(self, prompt: str | None) -> None:
        self.prompt = prompt

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        if self.prompt:
            print(self.prompt)
        print(logical(value, blob_def))


class CallbackSink(Sink):
    """Call ``handler(converted)``, or ``handler(converted, blob_def)`` with ``pass_blob`` (watch_scope)."""

    def __init__(self, handler: Callable[..., Any], pass_blob: bool = False) -> None:
        name = getattr(handler, "__name__", repr(handler))
        arity = 2 if pass_blob else 1
        try:
            params = list(inspect.signature(handler, eval_str=True).parameters.values())
        except NameError:
            params = list(inspect.signature(handler).parameters.values())
        except (TypeError, ValueError):
            params = None  # a builtin without a signature: trust it
        if params is not None:
            positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            required = [p for p in positional if p.default is p.empty]
            varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
            if not (len(required) <= arity and (len(positional) >= arity or varargs)):
                raise FlowjobError(f"the handler {name!r} must take exactly {arity} parameter(s) "
                                   f"({'value, blob_def' if pass_blob else 'value'}), it takes "
                                   f"{[p.name for p in params]}")
        annotation = params[0].annotation if params else inspect.Parameter.empty
        self.handler = handler
        self.pass_blob = pass_blob
        self.convert = converter_for(annotation, f"the handler {name!r}")

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        if self.pass_blob:
            self.handler(self.convert(value, blob_def), blob_def)
        else:
            self.handler(self.convert(value, blob_def))


def make_callback(target: Any = None, *, pass_blob: bool = False) -> Sink:
    """Factory of the ``callback`` sink: a callable handler, or None / a prompt string to print."""
    if target is None or isinstance(target, str):
        return PrintSink(target)
    if callable(target):
        return CallbackSink(target, pass_blob)
    raise FlowjobError(f"handler_or_prompt must be a callable, a string or None, got {target!r}")
