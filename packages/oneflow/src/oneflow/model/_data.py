"""``flow.model.DataModule`` and ``flow.model.NumpyDataModule``: where ``Model.fit`` takes its batches from.

``forward(step_idx, optimizer_idx)`` gives one batch; both are ``flow.nn.Module``s, as in legacy. In the object
style (eager tensors) either is called for every step and its batch handed to the model's steps as it is. In
the function style a ``DataModule``'s batch is made of blobs: it is called once, inside the job function, so
its ops (a data reader) run on every step. A ``NumpyDataModule``'s batch is a tuple of numpy
arrays: the first one fixes the job's placeholders, and it is called again for every step.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from flowjob_core import JobDefinitionError
from flowjob_core.imperative.module import Module
from flowjob_typing import Numpy, PlaceholderDef



class DataModule(Module):
    """Batches made of blobs, built inside the job function (``forward`` returns a blob or a tuple of them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, step_idx: int = 0, optimizer_idx: int = 0) -> Any:
        return None  # a subclass returns the batch

    def infer_oneflow_data_placeholder(self, batch: Any = None, optimizer_idx: int = 0) -> list[PlaceholderDef] | None:
        """The job's inputs for ``batch``: none, the batch is made inside the job."""
        return None


class NumpyDataModule(DataModule):
    """Batches of numpy arrays fed to the job function: ``forward`` returns a tuple of arrays."""

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def infer_oneflow_data_placeholder(self, batch: Any = None, optimizer_idx: int = 0) -> list[PlaceholderDef]:
        """One ``tp.Numpy.Placeholder`` per array of ``batch``, of its shape and dtype."""
        where = f"{type(self).__name__} (a flow.model.NumpyDataModule), the batch for optimizer_idx {optimizer_idx}"
        if not isinstance(batch, tuple):
            raise TypeError(f"{where}: forward must return a tuple of numpy arrays, got {type(batch).__name__}")
        placeholders = []
        for i, item in enumerate(batch):
            if not isinstance(item, np.ndarray):
                raise TypeError(f"{where}: item {i} is {type(item).__name__}, not a numpy array")
            try:
                placeholders.append(Numpy.Placeholder(item.shape, dtype=item.dtype))
            except JobDefinitionError as exc:
                raise JobDefinitionError(f"{where}: item {i} cannot be a job input ({exc})") from None
        return placeholders


__all__ = ["DataModule", "NumpyDataModule"]
