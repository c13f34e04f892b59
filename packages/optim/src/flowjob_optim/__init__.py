"""flowjob-optim: optimizers, learning-rate schedules, gradient clipping, regularizers and the optimizer pass.

``flowjob_optim.api`` is what ``flow.optimizer`` re-exports; ``flowjob_optim.regularizers`` is
``flow.regularizers``. Registered through the ``flowjob`` entry point ``optim``.
"""
from flowjob_optim import api, regularizers
from flowjob_optim.optimizer_pass import train_step_name

__version__ = "0.1.0"

__all__ = ["api", "regularizers", "train_step_name"]
