"""``flow.layers`` (from flowjob-ops)."""
from oneflow._lazy import require

require("flowjob_ops", "flowjob-ops", "flow.layers")

from flowjob_ops.layers import *  # noqa: E402,F401,F403 - flowjob_ops.layers.__all__ is the explicit list
from flowjob_ops.layers import __all__  # noqa: E402,F401
