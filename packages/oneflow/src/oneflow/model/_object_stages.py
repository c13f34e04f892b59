"""What ``Model.fit`` does at each step in the object style (legacy v0.4's default): eager tensors, no job function.

Training calls ``training_step(batch=..., optimizer_idx=...)`` on the data's batch for the step, then
``loss.backward()``, the optimizer's ``step()`` and ``zero_grad()``; validation calls ``validation_step(batch)``
under ``flow.no_grad()`` after steps ``k * step_interval - 1``; checkpointing saves the module's ``state_dict()``
into ``<save_dirpath>-<step index>`` after steps ``k * save_step_interval - 1`` (legacy's folder layout, written
beside and renamed into place) and loads one with ``load_state_dict`` before the first step.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from flowjob_core.api.model_io import checkpoint_save, get
from flowjob_core.imperative.grad_mode import no_grad
from flowjob_core.imperative.tensor import Tensor

from oneflow.model._callbacks import Callback
from oneflow.model._configs import CheckpointConfig, TrainingConfig, ValidationConfig


def loss_tensor(outputs: Any, model_name: str) -> Tensor:
    """What ``training_step`` returned: the loss tensor, or a tuple whose first item is the loss."""
    loss = outputs[0] if isinstance(outputs, tuple) and outputs else outputs
    if not isinstance(loss, Tensor):
        raise TypeError(f"{model_name}.training_step must return the loss (a flow.Tensor) or a tuple starting with "
                        f"it, got {type(loss).__name__}")
    if not loss.requires_grad:
        raise TypeError(f"{model_name}.training_step returned a loss that does not require a gradient: compute it "
                        f"from the model's parameters, outside flow.no_grad()")
    return loss


class ObjectTraining:
    name = "training"

    def __init__(self, model: Any, config: TrainingConfig, optimizers: Sequence[Any],
                 callbacks: list[Callback]) -> None:
        self.model, self.data, self.optimizers, self.callbacks = model, config.data, optimizers, callbacks

    def step(self, step_idx: int) -> None:
        for i, optimizer in enumerate(self.optimizers):
            batch = self.data(step_idx, i)
            outputs = self.model.training_step(batch=batch, optimizer_idx=i)
            loss_tensor(outputs, type(self.model).__name__).backward()
            optimizer.step()
            optimizer.zero_grad()
            for callback in self.callbacks:
                callback.on_training_step_end(outputs=outputs, step_idx=step_idx, optimizer_idx=i)


class ObjectValidation:
    name = "validation"

    def __init__(self, model: Any, config: ValidationConfig, callbacks: list[Callback]) -> None:
        self.model, self.data, self.interval, self.callbacks = model, config.data, config.step_interval, callbacks

    def step(self, step_idx: int) -> None:
        if (step_idx + 1) % self.interval:
            return
        with no_grad():
            batch = self.data(step_idx, 0)
            # legacy put the model in training mode while validating (and back after); a validation_step that
            # wants inference behaviour calls self.eval() itself
            was_training = self.model.training
            self.model.train()
            try:
                outputs = self.model.validation_step(batch)
            finally:
                self.model.train(was_training)
        for callback in self.callbacks:
            callback.on_validation_step_end(outputs=outputs, step_idx=step_idx)


class ObjectCheckpointing:
    name = "checkpointing"

    def __init__(self, model: Any, config: CheckpointConfig) -> None:
        self.model, self.config = model, config

    def load(self) -> None:
        """The module's parameters and buffers from the checkpoint folder (legacy's ``load_state_dict(
        GetCheckpoint(path))``: every name must match)."""
        if self.config.need_load:
            self.model.load_state_dict(get(os.fspath(self.config.load_dirpath or "")))

    def step(self, step_idx: int) -> None:
        config = self.config
        if config.need_save and (step_idx + 1) % config.save_step_interval == 0:
            checkpoint_save(f"{config.save_dirpath}-{step_idx}", self.model.state_dict())


__all__ = ["ObjectCheckpointing", "ObjectTraining", "ObjectValidation", "loss_tensor"]
