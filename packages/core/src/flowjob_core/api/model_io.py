"""The public entry points of legacy v0.3/v0.4 model I/O; the checkpoint code is in :mod:`flowjob_core.checkpoint`.

``flow.train.CheckPoint``, ``SimpleCheckPointManager`` and ``CheckpointManager`` save and load every
variable of the session; ``flow.checkpoint.get/save`` and ``flow.load_variables`` move values by name.

``flow.get_all_variables()`` gives a live :class:`VariableBlob` per variable of every defined job;
``flow.checkpoint.get(path)`` gives :class:`FileVariableBlob` values (legacy's file-backed blobs),
which here are the arrays themselves with ``numpy()`` and ``file_path`` added, so code written
for either (``value.numpy()`` or array arithmetic) works. Either kind, or a numpy array, goes into
``flow.load_variables`` and ``flow.checkpoint.save(path, var_dict)``. v0.3's top-level
``flow.load(path)`` / ``flow.save(var_dict, path)`` are the same functions with v0.3's argument order.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flowjob_core.checkpoint.session_checkpoint import CheckPoint, SimpleCheckPointManager
from flowjob_core.checkpoint.manager import CheckpointManager
from flowjob_core.checkpoint.save_load import CheckpointWarning, get, load_variables, prepare
from flowjob_core.checkpoint.save_load import save as save_folder
from flowjob_core.checkpoint.variable_blobs import FileVariableBlob, VariableBlob
from flowjob_core.runtime.session import Session, get_default_session


def get_all_variables(session: Session | None = None) -> dict[str, VariableBlob]:
    """``flow.get_all_variables()``: every variable of every defined job, by name (jobs traced first)."""
    session = session if session is not None else get_default_session()
    prepare(session)
    return {name: VariableBlob(name, session) for name in session.variables.names()}


def checkpoint_save(path: str | os.PathLike[str], var_dict: Mapping[str, Any] | None = None,
                    overwrite: bool = False) -> None:
    """``flow.checkpoint.save(path, var_dict=None)``: every variable, or those of ``var_dict``, into a new folder."""
    save_folder(path, overwrite=overwrite, var_dict=var_dict)


def save(var_dict: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """v0.3 ``flow.save(var_dict, path)``: ``var_dict`` (e.g. ``flow.get_all_variables()``) into a new folder."""
    checkpoint_save(path, var_dict)


def load(path: str | os.PathLike[str]) -> Any:
    """v0.3 ``flow.load(path)``: the same as ``flow.checkpoint.get(path)``."""
    return get(path)


__all__ = ["CheckPoint", "CheckpointManager", "CheckpointWarning", "FileVariableBlob", "SimpleCheckPointManager",
           "VariableBlob", "checkpoint_save", "get", "get_all_variables", "load", "load_variables", "save"]
