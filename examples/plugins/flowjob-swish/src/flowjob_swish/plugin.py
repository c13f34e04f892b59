"""The plugin object named by the ``flowjob`` entry point ``swish``: registers this package's ops."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_swish.ops import OPS


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in OPS:
        registry.add(op)
