"""The ops package's plugin: registers every op record of ``flowjob_ops.defs``."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_ops.defs import activations

OP_MODULES = (activations,)


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for module in OP_MODULES:
        for op in module.OPS:
            registry.add(op)
