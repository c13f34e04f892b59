"""flowjob-swish: the swish activation and a fused bias_add_gelu, as a third-party op plugin.

Call these inside a ``@flow.global_function`` body, like any ``flow.nn`` op.
"""
from __future__ import annotations

from flowjob_core import Blob, apply

__version__ = "0.1.0"


def swish(x: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """``x * sigmoid(beta * x)``, elementwise (SiLU when ``beta=1``)."""
    return apply("swish", [x], {"beta": float(beta)}, name=name)


def bias_add_gelu(x: Blob, b: Blob, name: str | None = None) -> Blob:
    """``gelu(x + b)`` in one op; ``b`` has shape ``(x.shape[-1],)``; gelu uses the tanh approximation

    ``0.5 u (1 + tanh(sqrt(2 / pi) (u + 0.044715 u^3)))``.
    """
    return apply("bias_add_gelu", [x, b], name=name)


__all__ = ["bias_add_gelu", "swish"]
