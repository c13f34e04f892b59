"""The ``dict`` sink (watch_scope's dict watcher): ``d[lbn] = {"blob": <local blob>, "blob_def": <blob>}``."""
from __future__ import annotations

import inspect
from typing import Any

from flowjob_core import FlowjobError

from flowjob_watch.sinks.base import Sink
from flowjob_watch.sinks.callback import converter_for


class DictSink(Sink):
    """Each step overwrites ``d[lbn]``; keys keep the order of their first delivery. Gradients are keyed
    by the forward lbn (use separate dicts for values and gradients, as legacy did)."""

    def __init__(self, target: dict) -> None:
        if not isinstance(target, dict):
            raise FlowjobError(f"the dict watcher must be a dict, got {type(target).__name__}")
        self.target = target
        self.local_blob = converter_for(inspect.Parameter.empty, "the dict watch sink")

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        self.target[blob_def.lbn] = {"blob": self.local_blob(value, blob_def), "blob_def": blob_def}
