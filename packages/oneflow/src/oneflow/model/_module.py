"""The base of legacy's model classes: calling one runs its ``forward``; ``train()`` / ``eval()`` set ``training``.

Legacy's classes derived from v0.4's eager ``nn.Module``; on job functions only its call protocol and the
training flag matter (parameters are ``flow.get_variable`` variables, found by name).
"""
from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T", bound="Module")


class Module:
    """Calling the object calls ``forward`` with the same arguments."""

    training: bool = True

    def __init__(self) -> None:
        self.training = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def train(self: T, mode: bool = True) -> T:
        self.training = bool(mode)
        return self

    def eval(self: T) -> T:
        return self.train(False)
