"""``flow.model``: legacy v0.4's object-style training API.

A ``Model`` subclass says how a batch becomes a loss (``training_step``), what validation returns
(``validation_step``) and which optimizers train it (``configure_optimizers``); ``Model.fit`` runs
``max_steps`` steps with the data of a ``TrainingConfig`` and a ``ValidationConfig`` (a ``DataModule`` or
``NumpyDataModule``), saving and loading checkpoints as a ``CheckpointConfig`` says and calling each
``Callback`` after every step. By default (the object style) the model is an eager ``flow.nn.Module`` trained
by ``flow.optim`` optimizers; with ``is_deprecated_function_style=True`` its steps become job functions
trained by ``flow.optimizer`` optimizers. Legacy exported ``Model`` as ``flow.Model`` too.
"""
from oneflow.model._callbacks import Callback
from oneflow.model._configs import CheckpointConfig, TrainingConfig, ValidationConfig
from oneflow.model._data import DataModule, NumpyDataModule
from oneflow.model._model import Model

NAMESPACES = {"flow": ["Model"]}
"""The names legacy exported at the top level as well; the face reads this literal."""
__all__ = ["Callback", "CheckpointConfig", "DataModule", "Model", "NumpyDataModule", "TrainingConfig",
           "ValidationConfig"]
