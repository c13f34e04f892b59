"""Variables as legacy's blob objects: live session variables and values read from a checkpoint folder."""
from __future__ import annotations

from typing import Any

import numpy as np

from flowjob_core.runtime import variable_shards
from flowjob_core.runtime.session import Session
from flowjob_core.runtime.world import world_of


class FileVariableBlob(np.ndarray):
    """A variable read from a checkpoint folder: the array, plus legacy's ``numpy()`` and ``file_path``."""

    file_path: str | None

    def __new__(cls, array: np.ndarray, file_path: str | None = None) -> FileVariableBlob:
        blob = np.asarray(array).view(cls)
        blob.file_path = file_path
        return blob

    def __array_finalize__(self, obj: Any) -> None:
        self.file_path = getattr(obj, "file_path", None)

    def numpy(self) -> np.ndarray:
        """A plain array copy of the stored value."""
        return np.array(self, copy=True, subok=False)


class VariableBlob:
    """A variable of the session (legacy's eager variable blob): ``numpy()`` reads its current value
    after the steps already launched have finished."""

    def __init__(self, name: str, session: Session) -> None:
        self.name = name
        self._session = session

    @property
    def shape(self) -> tuple[int, ...]:
        return self._session.variables[self.name].spec.shape

    @property
    def dtype(self) -> np.dtype:
        return self._session.variables[self.name].spec.dtype

    def numpy(self) -> np.ndarray:
        """The whole value. Of a variable split over MPI ranks it is gathered from every rank: every rank must
        call it at the same point of the program (as every rank runs the same script)."""
        self._session.sync()
        if self._session.variables[self.name].shard is not None:
            return variable_shards.gather_one(self._session, world_of(self._session), self.name)
        return self._session.variables.get(self.name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        return f"VariableBlob({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def host_value(value: Any) -> np.ndarray:
    """The array behind a value given to ``load_variables`` or ``save``: a blob's ``numpy()`` or the array."""
    if isinstance(value, np.ndarray):
        return np.asarray(value)
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)
