"""Legacy v0.4's ``flow.nn.Parameter``: a leaf tensor a ``flow.nn.Module`` registers as its parameter."""
from __future__ import annotations

from flowjob_core.imperative.tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor holding ``data``'s value (shared, not copied), requiring a gradient by default."""

    def __init__(self, data: Tensor, requires_grad: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TypeError(f"flow.nn.Parameter: data must be a flow.Tensor, got {type(data).__name__}")
        self._device = data.device
        self._init(data._value, None, None, False)
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return f"Parameter containing:\n{super().__repr__()}"


__all__ = ["Parameter"]
