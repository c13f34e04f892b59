"""``flow.train``: checkpoints (``CheckpointManager`` is an extension: the last N kept, a ``latest`` pointer)."""
from flowjob_core.api.checkpoint import CheckPoint, SimpleCheckPointManager
from flowjob_core.api.checkpoint_manager import CheckpointManager

__all__ = ["CheckPoint", "CheckpointManager", "SimpleCheckPointManager"]
