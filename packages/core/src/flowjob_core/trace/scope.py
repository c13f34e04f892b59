"""Scopes active while a job body is traced: namespace, placement, logical view, blob observers and legacy's
scope attributes (checked by :mod:`flowjob_core.config.scope_config`)."""
from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

_namespaces: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("flowjob_namespaces", default=())
_placements: contextvars.ContextVar[tuple["Placement", ...]] = contextvars.ContextVar("flowjob_placements", default=())
_views: contextvars.ContextVar[tuple["LogicalView", ...]] = contextvars.ContextVar("flowjob_views", default=())
_attributes: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar(
    "flowjob_scope_attributes", default=())
_observers: contextvars.ContextVar[tuple[Callable[..., None], ...]] = contextvars.ContextVar(
    "flowjob_blob_observers", default=())

DEVICE_IDS = re.compile(r"^\s*(\d+)\s*:\s*(\d+)(?:\s*-\s*(\d+))?\s*$")


def _push(var: contextvars.ContextVar, value: Any) -> contextvars.Token:
    return var.set(var.get() + (value,))


@contextlib.contextmanager
def namespace(name: str) -> Iterator[None]:
    """``flow.scope.namespace(name)``: ops and variables created inside are named ``name-<inner>``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"flow.scope.namespace needs a non-empty string, got {name!r}")
    token = _push(_namespaces, name)
    try:
        yield
    finally:
        _namespaces.reset(token)


def current_namespace() -> tuple[str, ...]:
    return _namespaces.get()


def scoped_name(name: str) -> str:
    return "-".join(_namespaces.get() + (name,))


@dataclass(frozen=True)
class Placement:
    """``flow.scope.placement(device_tag, machine_device_ids)``: where the ops inside run."""

    device_tag: str
    machine_device_ids: tuple[str, ...]

    @property
    def device_count(self) -> int:
        count = 0
        for ids in self.machine_device_ids:
            m = DEVICE_IDS.match(ids)
            assert m is not None
            lo, hi = int(m.group(2)), int(m.group(3) or m.group(2))
            count += hi - lo + 1
        return count

    def __enter__(self) -> "Placement":
        # frozen for hashing; the token stack is bookkeeping, not identity
        self.__dict__.setdefault("_tokens", []).append(_push(_placements, self))
        return self

    def __exit__(self, *exc: Any) -> None:
        _placements.reset(self.__dict__["_tokens"].pop())


def current_placement() -> Placement | None:
    stack = _placements.get()
    return stack[-1] if stack else None


@dataclass(frozen=True)
class LogicalView:
    """``flow.scope.consistent_view()`` / ``mirrored_view()``: a config value and a context manager."""

    kind: str  # "consistent" or "mirrored"

    def __enter__(self) -> "LogicalView":
        self.__dict__.setdefault("_tokens", []).append(_push(_views, self))
        return self

    def __exit__(self, *exc: Any) -> None:
        _views.reset(self.__dict__["_tokens"].pop())


def consistent_view() -> LogicalView:
    return LogicalView("consistent")


def mirrored_view() -> LogicalView:
    return LogicalView("mirrored")


def current_view() -> LogicalView | None:
    stack = _views.get()
    return stack[-1] if stack else None


@contextlib.contextmanager
def observe_blobs(observer: Callable[..., None]) -> Iterator[None]:
    """Call ``observer(blob)`` for every blob created inside (watch_scope builds on this)."""
    token = _push(_observers, observer)
    try:
        yield
    finally:
        _observers.reset(token)


def current_observers() -> tuple[Callable[..., None], ...]:
    return _observers.get()


@contextlib.contextmanager
def attributes(values: dict[str, Any]) -> Iterator[None]:
    """Ops traced inside carry ``values`` (over those of enclosing calls) in ``Node.scope``."""
    merged = dict(_attributes.get())
    merged.update(values)
    token = _attributes.set(tuple(sorted(merged.items())))
    try:
        yield
    finally:
        _attributes.reset(token)


def current_attributes() -> tuple[tuple[str, Any], ...]:
    return _attributes.get()
