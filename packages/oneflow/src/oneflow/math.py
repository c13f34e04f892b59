"""``flow.math`` (from flowjob-ops)."""
from oneflow._lazy import require

require("flowjob_ops", "flowjob-ops", "flow.math")

from flowjob_ops.math import *  # noqa: E402,F401,F403 - flowjob_ops.math.__all__ is the explicit list
from flowjob_ops.math import __all__  # noqa: E402,F401
