"""``flow.nn``: neural-network ops (from flowjob-ops), v0.4's eager modules (from flowjob-core) and ``flow.nn.init``."""
from oneflow import _nn_init as init
from oneflow._exports import Source, export, ops

SOURCES = (ops("activations"), ops("softmax"), ops("dropout"), ops("bias_add"), ops("attention"), ops("conv"),
           ops("pool"), ops("normalization"), ops("losses", "flow.nn"), ops("pixel_shuffle"), ops("triangular"),
           Source("flowjob_core.imperative.module", "flowjob-core", namespace="flow.nn"),
           Source("flowjob_core.imperative.parameter", "flowjob-core"),
           ops("nn_embedding"))

__all__ = [*export(globals(), "flow.nn", *SOURCES), "init"]
