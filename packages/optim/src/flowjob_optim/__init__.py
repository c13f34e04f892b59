"""flowjob-optim: optimizers, learning-rate schedules, gradient clipping, regularizers and the optimizer pass.

``flowjob_optim.api`` is what ``flow.optimizer`` re-exports; ``flowjob_optim.regularizers`` is
``flow.regularizers``. Registered through the ``flowjob`` entry point ``optim``.
"""
from flowjob_core.ir.naming import train_step_name
from flowjob_optim import api, regularizers

__version__ = "0.1.0"

__all__ = ["api", "regularizers", "train_step_name"]
