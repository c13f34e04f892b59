"""Turning what the user passed to ``flow.watch`` into a consumer of host values."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from flowjob_core import FlowjobError

Consumer = Callable[[Any, Any], None]  # (host value, blob definition)


def printing_handler(prompt: str | None) -> Consumer:
    def show(value: Any, blob: Any) -> None:
        if prompt:
            print(prompt)
        print(value)

    return show


def callback_handler(handler: Callable[..., Any], registries: Any, what: str) -> Consumer:
    """A one-parameter handler, its value converted by the parameter's annotation."""
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) != 1 or params[0].kind in (params[0].VAR_POSITIONAL, params[0].VAR_KEYWORD):
        raise FlowjobError(f"{what}: the handler {getattr(handler, '__name__', handler)!r} must take exactly one "
                           f"parameter, it takes {len(params)}")
    annotation = params[0].annotation
    if isinstance(annotation, str):
        try:
            annotation = inspect.signature(handler, eval_str=True).parameters[params[0].name].annotation
        except Exception:
            pass
    convert = registries.result_kinds.value_converter(annotation)
    if convert is None:
        raise FlowjobError(f"{what}: the handler's parameter annotation {annotation!r} is not supported; "
                           f"use tp.Numpy, tp.ListNumpy, tp.ListListNumpy or none")

    def consume(value: Any, blob: Any) -> None:
        handler(convert(value, blob))

    return consume


def make_consumer(handler_or_prompt: Any, registries: Any, what: str) -> Consumer:
    if handler_or_prompt is None or isinstance(handler_or_prompt, str):
        return printing_handler(handler_or_prompt)
    if callable(handler_or_prompt):
        return callback_handler(handler_or_prompt, registries, what)
    raise FlowjobError(f"{what}: handler_or_prompt must be a callable, a string or None, got {handler_or_prompt!r}")
