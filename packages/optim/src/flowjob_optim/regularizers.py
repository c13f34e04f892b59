"""``flow.regularizers``: L1/L2 penalties attached to variables (``get_variable(..., regularizer=...)``,
``layers.dense(..., kernel_regularizer=...)``).

A regularizer is data, not graph: the optimizer pass adds its term to the variable's
1/N-scaled gradient inside the fused update, as legacy did
(``g' = g + l1 * sign(w) + l2 * w``). The variable definition names it by its key in the
global function's bindings (``VariableDef.regularizer``), as the job names every Python object.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Regularizer:
    """An L1 and an L2 coefficient."""

    l1: float = 0.0
    l2: float = 0.0

    def __post_init__(self) -> None:
        for name in ("l1", "l2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"regularizer {name} must be a non-negative number, got {value!r}")
            object.__setattr__(self, name, float(value))


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> Regularizer:
    """``l1 * sum(|w|) + l2 / 2 * sum(w^2)`` (gradient ``l1 * sign(w) + l2 * w``)."""
    return Regularizer(l1, l2)


def l1(l: float = 0.01) -> Regularizer:  # noqa: E741 - the legacy parameter name
    """``l * sum(|w|)``."""
    return Regularizer(l, 0.0)


def l2(l: float = 0.01) -> Regularizer:  # noqa: E741 - the legacy parameter name
    """``l / 2 * sum(w^2)``."""
    return Regularizer(0.0, l)


__all__ = ["Regularizer", "l1", "l1_l2", "l2"]
