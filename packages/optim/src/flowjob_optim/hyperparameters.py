"""How optimizers and schedules show themselves: their type and the hyper-parameters they hold, as text.

A job names an optimizer, a schedule or a regularizer by a key of its global function's bindings
(``optimizer='SGD#0'``); ``python -m oneflow dump`` prints what each key names with this text, so
the printout holds no Python object reprs: ``SGD#0: SGD(lr_scheduler=PiecewiseConstantScheduler(
base_lr=0.1, boundaries=[], values=[0.1]), weight_decay=0.0, momentum=0.9)``.
"""
from __future__ import annotations


class HyperParameters:
    """Base whose ``repr`` is ``Type(name=value, ...)`` over the public attributes that are set (not None)."""

    def __repr__(self) -> str:
        items = ", ".join(f"{name}={value!r}" for name, value in vars(self).items()
                          if not name.startswith("_") and value is not None)
        return f"{type(self).__name__}({items})"


__all__ = ["HyperParameters"]
