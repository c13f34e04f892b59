"""``flow.train``: checkpoints."""
from flowjob_core.checkpoint import CheckPoint, SimpleCheckPointManager

__all__ = ["CheckPoint", "SimpleCheckPointManager"]
