"""``oneflow.typing``: annotations for global function parameters and results."""
from oneflow._lazy import require

require("flowjob_typing", "flowjob-typing", "oneflow.typing")

from flowjob_typing import Bundle, Callback, Dict, Future, ListListNumpy, ListNumpy, Numpy  # noqa: E402

__all__ = ["Bundle", "Callback", "Dict", "Future", "ListListNumpy", "ListNumpy", "Numpy"]
