"""``flow.regularizers`` (from flowjob-optim)."""
from oneflow._lazy import require

require("flowjob_optim", "flowjob-optim", "flow.regularizers")

from flowjob_optim.regularizers import *  # noqa: E402,F401,F403
from flowjob_optim.regularizers import __all__  # noqa: E402,F401
