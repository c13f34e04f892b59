"""``flow.checkpoint`` (version 0.3: save, get) and ``flow.load_variables``."""
from flowjob_core.checkpoint import get, load_variables, save

__all__ = ["get", "load_variables", "save"]
