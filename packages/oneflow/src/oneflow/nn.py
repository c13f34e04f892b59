"""``flow.nn``: neural-network ops (from flowjob-ops)."""
from oneflow._lazy import require

require("flowjob_ops", "flowjob-ops", "flow.nn")

from flowjob_ops.nn import *  # noqa: E402,F401,F403 - flowjob_ops.nn.__all__ is the explicit list
from flowjob_ops.nn import __all__  # noqa: E402,F401
