"""Legacy v0.4's ``flow.no_grad``: tensors computed inside it keep no graph, whatever their inputs require."""
from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# per thread and task, as the job builder's context is (flowjob_core.trace.builder)
_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("flowjob_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    return _enabled.get()


class no_grad:  # noqa: N801 - legacy's name
    """``with flow.no_grad():`` (or ``@flow.no_grad()`` on a function): results are leaves needing no
    gradient, as a parameter update wants."""

    def __init__(self) -> None:
        self._tokens: list[contextvars.Token[bool]] = []

    def __enter__(self) -> "no_grad":
        self._tokens.append(_enabled.set(False))
        return self

    def __exit__(self, *exc: Any) -> None:
        _enabled.reset(self._tokens.pop())

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with no_grad():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


NAMESPACES = {"flow": ["no_grad"]}  # the face's flow.no_grad
__all__ = ["is_grad_enabled", "no_grad"]
