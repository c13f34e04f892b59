"""``flow.model.Model`` (also ``flow.Model``): a model class whose ``fit`` trains, validates and checkpoints.

A subclass defines ``training_step(batch, optimizer_idx)`` (the loss, or a tuple starting with it),
``validation_step(batch)`` and ``configure_optimizers()`` (an optimizer or a list of them, one per training
pass). ``Model`` is a ``flow.nn.Module``, and by default (legacy v0.4's object style) it is trained eagerly:
its steps compute on ``flow.Tensor``s with the module's parameters, ``configure_optimizers`` returns
``flow.optim`` optimizers, and ``fit`` calls ``loss.backward()``, ``step()`` and ``zero_grad()``
(``oneflow.model._object_stages``). With ``Model(is_deprecated_function_style=True)`` the steps are job
function bodies written with ``flow.*`` ops on blobs and ``flow.optimizer`` optimizers, and ``fit`` makes the
job functions (``oneflow.model._stages``); under ``flow.enable_eager_execution(True)`` those run op by op.
"""
from __future__ import annotations

import warnings
from typing import Any

from flowjob_core import ConfigError, clear_default_session
from flowjob_core.imperative.module import Module

from oneflow.model._callbacks import Callback
from oneflow.model._configs import CheckpointConfig, TrainingConfig, ValidationConfig
from oneflow.model._object_stages import ObjectCheckpointing, ObjectTraining, ObjectValidation
from oneflow.model._stages import Checkpointing, Training, Validation


class Model(Module):
    """A model trained by ``fit``; see the module's description."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # a function-style forward may take keyword arguments; the object style runs the forward pre-hooks
        return self.forward(*args, **kwargs) if kwargs else super().__call__(*args)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self._is_deprecated_function_style = bool(kwargs.get("is_deprecated_function_style", False))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The prediction (``training_step`` typically calls ``self(images)``): on tensors, or on blobs in the
        function style."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        """One training batch to its loss (or a tuple whose first item is the loss)."""
        raise NotImplementedError(f"{type(self).__name__}.training_step is not defined")

    def validation_step(self, *args: Any, **kwargs: Any) -> Any:
        """One validation batch to what the callbacks' ``on_validation_step_end`` receive."""
        raise NotImplementedError(f"{type(self).__name__}.validation_step is not defined")

    def configure_optimizers(self) -> Any:
        """The optimizer or a list of them, one training pass each: ``flow.optim`` optimizers of the model's
        parameters, or ``flow.optimizer`` ones in the function style."""
        raise NotImplementedError(f"{type(self).__name__}.configure_optimizers is not defined")

    def method_overrided(self, method_name: str) -> bool:  # legacy's spelling
        """Whether the subclass defines ``method_name``."""
        return getattr(type(self), method_name) is not getattr(Model, method_name)

    def fit(self, training_config: TrainingConfig | None = None, validation_config: ValidationConfig | None = None,
            checkpoint_config: CheckpointConfig | None = None,
            callbacks: Callback | list[Callback] | None = None, max_steps: int = 100) -> None:
        """Run ``max_steps`` steps on a new default session: each step trains (every optimizer in turn), then
        validates every ``validation_config.step_interval`` steps, then saves a checkpoint every
        ``checkpoint_config``'s ``save_step_interval`` steps; the checkpoint to load is loaded first."""
        owner = f"{type(self).__name__}.fit"
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
            raise ValueError(f"{owner}: max_steps must be an int >= 0, got {max_steps!r}")
        listeners = _callbacks(callbacks, owner)
        if training_config is None and validation_config is None:
            warnings.warn(f"{owner} does nothing: neither training_config nor validation_config is given",
                          stacklevel=2)
            return
        functions = self._is_deprecated_function_style
        clear_default_session()  # legacy: fit starts a new default session (the jobs' in the function style)
        stages: list[Any] = []
        if training_config is not None:
            _check(training_config, TrainingConfig, "training_config", owner)
            self._require("training_step", "training_config", owner)
            optimizers = self._optimizers(owner)
            stages.append(Training(self, training_config, optimizers, listeners) if functions else
                          ObjectTraining(self, training_config, optimizers, listeners))
        if validation_config is not None:
            _check(validation_config, ValidationConfig, "validation_config", owner)
            self._require("validation_step", "validation_config", owner)
            stages.append(Validation(self, validation_config, listeners) if functions else
                          ObjectValidation(self, validation_config, listeners))
        if checkpoint_config is not None:
            _check(checkpoint_config, CheckpointConfig, "checkpoint_config", owner)
            checkpointing = Checkpointing(checkpoint_config) if functions else ObjectCheckpointing(self,
                                                                                                  checkpoint_config)
            checkpointing.load()
            stages.append(checkpointing)
        for step_idx in range(max_steps):
            for stage in stages:
                try:
                    stage.step(step_idx)
                except Exception as exc:
                    exc.add_note(f"flow.model: raised by the {stage.name} of step {step_idx} of {owner}")
                    raise

    def _require(self, method: str, argument: str, owner: str) -> None:
        if not self.method_overrided(method):
            raise ConfigError(f"{owner}: {argument} is given but {type(self).__name__} does not define {method}")

    def _optimizers(self, owner: str) -> list[Any]:
        self._require("configure_optimizers", "training_config", owner)
        found = self.configure_optimizers()
        optimizers = list(found) if isinstance(found, (list, tuple)) else [found]
        functions = self._is_deprecated_function_style
        kind = "flow.optimizer" if functions else "flow.optim"
        for optimizer in optimizers:
            if functions:
                fits = callable(getattr(optimizer, "minimize", None))
            else:  # flow.optim's optimizers (duck-typed: flowjob-optim is an optional distribution of the face)
                fits = callable(getattr(optimizer, "step", None)) and callable(getattr(optimizer, "zero_grad", None))
            if not fits:
                style = ("is_deprecated_function_style=True" if functions else
                         "the object style, Model's default; flow.optimizer optimizers need "
                         "is_deprecated_function_style=True")
                raise TypeError(f"{owner}: {type(self).__name__}.configure_optimizers must return a {kind} "
                                f"optimizer or a list or tuple of them, got {type(found).__name__}"
                                + (f" holding {type(optimizer).__name__}" if optimizer is not found else "")
                                + f" ({style})")
        if not optimizers:
            raise ValueError(f"{owner}: {type(self).__name__}.configure_optimizers returned no optimizer")
        return optimizers


def _check(config: Any, kind: type, argument: str, owner: str) -> None:
    if not isinstance(config, kind):
        raise TypeError(f"{owner}: {argument} must be a flow.model.{kind.__name__}, got {type(config).__name__}")
    if not config.check_valid():
        raise ConfigError(f"{owner}: {argument} is not valid: {config.error_msg}")


def _callbacks(callbacks: Any, owner: str) -> list[Callback]:
    if callbacks is None:
        return []
    listed = [callbacks] if isinstance(callbacks, Callback) else callbacks
    if not isinstance(listed, (list, tuple)) or not all(isinstance(c, Callback) for c in listed):
        raise TypeError(f"{owner}: callbacks must be a flow.model.Callback or a list of them, got {callbacks!r}")
    return list(listed)


__all__ = ["Model"]
