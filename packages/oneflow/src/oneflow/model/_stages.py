"""What ``Model.fit`` does at each step: train (one job per optimizer), validate, save a checkpoint.

Each stage is built once per ``fit`` (its jobs defined, a ``NumpyDataModule``'s first batch read) and then
stepped with the step index, in that order. Legacy's semantics: step 0 feeds the batch read when the jobs
were built; validation runs after steps ``k * step_interval - 1``; checkpoints go to
``<save_dirpath>-<step index>`` after steps ``k * save_step_interval - 1``.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from flowjob_core.api.model_io import checkpoint_save, get, load_variables

from oneflow.model._callbacks import Callback
from oneflow.model._configs import CheckpointConfig, TrainingConfig, ValidationConfig
from oneflow.model._data import DataModule, NumpyDataModule
from oneflow.model._jobs import job_function, training_body, validation_body


def read_batch(data: DataModule, step_idx: int, optimizer_idx: int) -> tuple[Any, ...]:
    """A ``NumpyDataModule``'s batch for a step: a tuple, fed to the job's placeholders."""
    batch = data(step_idx, optimizer_idx)
    if not isinstance(batch, tuple):
        raise TypeError(f"{type(data).__name__}({step_idx}, {optimizer_idx}) (a flow.model.NumpyDataModule) must "
                        f"return a tuple of numpy arrays, got {type(batch).__name__}")
    return batch


class Training:
    name = "training"

    def __init__(self, model: Any, config: TrainingConfig, optimizers: Sequence[Any],
                 callbacks: list[Callback]) -> None:
        self.callbacks = callbacks
        self.data = config.data
        self.numpy_input = isinstance(self.data, NumpyDataModule)
        self.first_batches: list[tuple[Any, ...]] = []
        self.jobs = []
        stem = f"{type(model).__name__}_Model_train_{'numpy_' if self.numpy_input else ''}job_"
        for i, optimizer in enumerate(optimizers):
            batch = read_batch(self.data, 0, i) if self.numpy_input else ()
            self.first_batches.append(batch)
            self.jobs.append(job_function(f"{stem}{i}", "train", config.exe_cfg, training_body(model, optimizer, i),
                                          self.data, batch, i))

    def step(self, step_idx: int) -> None:
        for i, job in enumerate(self.jobs):
            batch = self.first_batches[i] if step_idx == 0 or not self.numpy_input else read_batch(
                self.data, step_idx, i)
            outputs = job(*batch).get()
            for callback in self.callbacks:
                callback.on_training_step_end(outputs=outputs, step_idx=step_idx, optimizer_idx=i)


class Validation:
    name = "validation"

    def __init__(self, model: Any, config: ValidationConfig, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks
        self.data = config.data
        self.interval = config.step_interval
        self.numpy_input = isinstance(self.data, NumpyDataModule)
        self.first_batch = read_batch(self.data, 0, 0) if self.numpy_input else ()
        name = f"{type(model).__name__}_Model_eval_{'numpy_' if self.numpy_input else ''}job"
        self.job = job_function(name, "predict", config.exe_cfg, validation_body(model, self.numpy_input), self.data,
                                self.first_batch, 0)

    def step(self, step_idx: int) -> None:
        if (step_idx + 1) % self.interval:
            return
        batch = self.first_batch if step_idx == 0 or not self.numpy_input else read_batch(self.data, step_idx, 0)
        outputs = self.job(*batch).get()
        for callback in self.callbacks:
            callback.on_validation_step_end(outputs=outputs, step_idx=step_idx)


class Checkpointing:
    name = "checkpointing"

    def __init__(self, config: CheckpointConfig) -> None:
        self.config = config

    def load(self) -> None:
        """Every variable the checkpoint holds and the jobs have (legacy's ``LoadVariables(GetCheckpoint(path))``)."""
        if self.config.need_load:
            load_variables(get(os.fspath(self.config.load_dirpath or "")))

    def step(self, step_idx: int) -> None:
        config = self.config
        if config.need_save and (step_idx + 1) % config.save_step_interval == 0:
            checkpoint_save(f"{config.save_dirpath}-{step_idx}")


__all__ = ["Checkpointing", "Training", "Validation", "read_batch"]
