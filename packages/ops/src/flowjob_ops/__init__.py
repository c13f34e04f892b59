"""flowjob-ops: op records and the public functions of flow.nn, flow.math, flow.layers.

``flowjob_ops.records`` holds the op records (one ``OpDef`` per op: inference, gradient rule,
kernel); ``plugin`` registers them. The public modules are ``nn``, ``math``, ``layers``,
``array_ops`` (top-level ``flow.reshape`` etc.) and ``initializers``.
"""
from flowjob_ops import array_ops, initializers, layers, math, nn

__version__ = "0.1.0"
__all__ = ["array_ops", "initializers", "layers", "math", "nn"]
