"""Legacy v0.4's eager optimizers (``flow.optim``) and their learning-rate schedulers (``flow.optim.lr_scheduler``).

They train ``flow.nn.Parameter``s: ``step()`` runs this package's update ops (``flowjob_optim.update_ops``, the
kernels lazy jobs use) on each parameter that has a gradient, through ``flowjob_core.imperative.tensor_update``
(its kernel built once per parameter, no job per step). A file per optimizer and per scheduler, as legacy had.
"""
