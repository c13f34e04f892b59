"""``flow.optimizer`` (from flowjob-optim)."""
from oneflow._lazy import require

require("flowjob_optim", "flowjob-optim", "flow.optimizer")

from flowjob_optim.api import *  # noqa: E402,F401,F403 - flowjob_optim.api.__all__ is the explicit list
from flowjob_optim.api import __all__  # noqa: E402,F401
