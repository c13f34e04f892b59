"""The watch package's plugin: the watch pass."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_watch.instrument import instrument


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add("watch", instrument, after="autodiff", before="dce")
