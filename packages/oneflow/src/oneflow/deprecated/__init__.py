"""``flow.deprecated``: legacy's deprecated names (``flow.deprecated.nn.Module``)."""
from oneflow.deprecated import nn

__all__ = ["nn"]
