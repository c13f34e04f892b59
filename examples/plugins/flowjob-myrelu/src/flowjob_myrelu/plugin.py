"""The plugin object named by the ``flowjob`` entry point ``myrelu``: its ops, and the legacy library they replace."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_myrelu.ops import OPS

# the file legacy's documentation built the C++ op into; flow.config.load_library("final_relu.so") finds it here
LIBRARIES = ["final_relu.so"]


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in OPS:
        registry.add(op)


@hookimpl
def flowjob_op_libraries() -> list[str]:
    return list(LIBRARIES)
