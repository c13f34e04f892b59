"""``flow.losses``: version-0.1 loss registration."""
from flowjob_core import add_loss

__all__ = ["add_loss"]
