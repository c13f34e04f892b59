"""The objects a job refers to by key: user handlers, sink instances, symbolic blobs, step consumers.

A :class:`~flowjob_core.ir.job.Job` is plain data (it can be deep-copied, compared and printed
without touching user objects), so an intent or a side output that needs a Python object
names it by a key of a ``Bindings`` table instead. Each global function owns one table: the
job body's calls add to it while the job is traced, passes add to it through
``PassContext.bindings``, and the planner looks the side outputs' consumers up in it.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from flowjob_core.errors import FlowjobError

_STEM = re.compile(r"[^A-Za-z0-9_.-]+")


class Bindings:
    """Key -> object. Adding the same object twice gives the same key (one sink watched ten times is one sink)."""

    def __init__(self) -> None:
        self._objects: dict[str, Any] = {}
        self._key_of: dict[int, str] = {}  # id(obj) -> key; the table holds obj, so ids are not reused

    def add(self, obj: Any, stem: str = "") -> str:
        """The key of ``obj``, adding it under ``<stem>#<n>`` when it is new.

        ``stem`` only makes the key readable in a printed job (``callback#0``); it carries no meaning.
        """
        key = self._key_of.get(id(obj))
        if key is not None:
            return key
        stem = _STEM.sub("_", stem or type(obj).__name__) or "obj"
        key = f"{stem}#{len(self._objects)}"
        self._objects[key] = obj
        self._key_of[id(obj)] = key
        return key

    def __getitem__(self, key: str) -> Any:
        try:
            return self._objects[key]
        except KeyError:
            raise FlowjobError(f"no object is bound to key {key!r} (known keys: {sorted(self._objects)[:8]}); "
                               f"a pass must add it with ctx.bindings.add(obj) and record the returned key") from None

    def consumer(self, key: str, where: str) -> Callable[[Any], None]:
        """The callable bound to ``key``; ``where`` (e.g. the job and side output) names the user of the key."""
        try:
            obj = self[key]
        except FlowjobError as exc:
            raise FlowjobError(f"{where}: {exc}") from None
        if not callable(obj):
            raise FlowjobError(f"{where}: the object bound to {key!r} is a {type(obj).__name__}, not a callable")
        return obj

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __iter__(self) -> Iterator[str]:
        return iter(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    def __repr__(self) -> str:
        return f"<Bindings {list(self._objects)}>"
