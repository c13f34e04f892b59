"""``flow.model.Callback``: what ``Model.fit`` calls after each training and validation step."""
from __future__ import annotations

from typing import Any


class Callback:
    """The base of ``Model.fit``'s callbacks: override the hooks you need (each does nothing here); ``fit``
    calls them with keyword arguments.

    ``outputs`` is what the step returned: in the object style the step's own values (tensors: ``.numpy()``);
    in the function style the job's, fetched: a local blob (``.numpy()``, and numpy's attributes such as
    ``.mean()``) or a tuple of them.
    """

    def on_training_step_end(self, outputs: Any, step_idx: int = 0, optimizer_idx: int = 0) -> None:
        """After the training job of optimizer ``optimizer_idx`` ran step ``step_idx``."""

    def on_validation_step_end(self, outputs: Any, step_idx: int = 0) -> None:
        """After the validation job ran, following training step ``step_idx``."""


__all__ = ["Callback"]
