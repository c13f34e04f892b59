"""``flow.checkpoint`` (legacy v0.4 model I/O): ``save(path, var_dict=None)`` and ``get(path)``."""
from flowjob_core.api.model_io import checkpoint_save as save
from flowjob_core.api.model_io import get

__all__ = ["get", "save"]
