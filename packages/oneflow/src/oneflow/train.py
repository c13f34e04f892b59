"""``flow.train``: checkpoints (``CheckpointManager`` is an extension: the last N kept, a ``latest`` pointer)."""
from flowjob_core.api.model_io import CheckPoint, CheckpointManager, SimpleCheckPointManager

__all__ = ["CheckPoint", "CheckpointManager", "SimpleCheckPointManager"]
