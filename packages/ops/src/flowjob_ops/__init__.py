"""flowjob-ops: op records and the public functions of flow.nn, flow.math, flow.layers."""
from flowjob_ops import nn

__all__ = ["nn"]
