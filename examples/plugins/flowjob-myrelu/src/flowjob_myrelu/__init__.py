"""flowjob-myrelu: legacy OneFlow's documented custom op ``myrelu`` (built as ``final_relu.so``), ported.

A legacy program keeps its ``flow.config.load_library("final_relu.so")`` line and its
``flow.user_op_builder(...).Op("myrelu").Input("in", [x]).Output("out")`` wrapper: this plugin registers
an op record of the same type and argument names, and declares (hook ``flowjob_op_libraries``) that it
provides that library's ops, so the load goes on and the builder finds the op.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
