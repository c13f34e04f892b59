"""``flow.optim`` (from flowjob-optim): legacy v0.4's eager optimizers, which train ``flow.nn.Parameter``s, and
``flow.optim.lr_scheduler``. v0.4 exported them as ``oneflow.experimental.optim``; ``flow.experimental`` gives
this module too."""
from oneflow._exports import Source, export
from oneflow.optim import lr_scheduler

SOURCES = tuple(Source(f"flowjob_optim.eager.{module}", "flowjob-optim", legacy=(name,))
                for module, name in (("sgd", "SGD"), ("adam", "Adam"), ("adamw", "AdamW"), ("rmsprop", "RMSprop")))

__all__ = [*export(globals(), "flow.optim", *SOURCES), "lr_scheduler"]
