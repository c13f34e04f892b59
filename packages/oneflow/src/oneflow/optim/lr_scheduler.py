"""``flow.optim.lr_scheduler`` (from flowjob-optim): legacy v0.4's schedulers of ``flow.optim``'s learning rates."""
from oneflow._exports import Source, export

SOURCES = tuple(Source(f"flowjob_optim.eager.{module}", "flowjob-optim", legacy=(name,))
                for module, name in (("cosine_scheduler", "CosineScheduler"), ("lambda_lr", "LambdaLR"),
                                     ("step_lr", "StepLR")))

__all__ = export(globals(), "flow.optim.lr_scheduler", *SOURCES)
