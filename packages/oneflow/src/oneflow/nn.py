"""``flow.nn``: neural-network ops (from flowjob-ops), and ``flow.nn.init``."""
from oneflow import _nn_init as init
from oneflow._exports import export, ops

SOURCES = (ops("activations"), ops("softmax"), ops("dropout"), ops("bias_add"), ops("attention"), ops("conv"),
           ops("pool"), ops("normalization"), ops("losses", "flow.nn"), ops("pixel_shuffle"), ops("triangular"))

__all__ = [*export(globals(), "flow.nn", *SOURCES), "init"]
