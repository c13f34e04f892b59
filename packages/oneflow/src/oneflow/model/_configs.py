"""``flow.model.TrainingConfig``, ``ValidationConfig`` and ``CheckpointConfig``: what ``Model.fit`` runs.

Each setter checks its argument and raises naming it. ``check_valid()`` (legacy's) says whether the whole
config can run and leaves the reasons in ``error_msg``, which ``Model.fit`` raises.
"""
from __future__ import annotations

import os
from typing import Any

from flowjob_core import FunctionConfig

from oneflow.model._data import DataModule


def _data(data: Any, owner: str) -> DataModule:
    if not isinstance(data, DataModule):
        raise TypeError(f"{owner}.config_data: data must be a flow.model.DataModule or NumpyDataModule, "
                        f"got {type(data).__name__}")
    return data


def _execution(exe_cfg: Any, owner: str) -> FunctionConfig:
    if not isinstance(exe_cfg, FunctionConfig):
        raise TypeError(f"{owner}.config_execution: exe_cfg must come from flow.ExecutionConfig() "
                        f"(flow.function_config()), got {type(exe_cfg).__name__}")
    return exe_cfg


def _is_interval(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _interval(step_interval: Any, where: str) -> int:
    if not _is_interval(step_interval):
        raise ValueError(f"{where}: step_interval must be an int > 0, got {step_interval!r}")
    return step_interval


def _dirpath(dirpath: Any, where: str) -> str:
    if not isinstance(dirpath, (str, os.PathLike)):
        raise TypeError(f"{where}: dirpath must be a folder path, got {dirpath!r}")
    return os.fspath(dirpath)


class _StageConfig:
    """The execution config and data a job of ``Model.fit`` is built with."""

    def __init__(self) -> None:
        self.exe_cfg: Any = FunctionConfig()
        self.data: Any = None
        self.error_msg = ""

    def config_execution(self, exe_cfg: FunctionConfig | None = None) -> None:
        """The function config of the job (``flow.ExecutionConfig()``: legacy's name of ``flow.function_config()``)."""
        self.exe_cfg = _execution(exe_cfg, type(self).__name__)

    def config_data(self, data: DataModule | None = None) -> None:
        self.data = _data(data, type(self).__name__)

    def _problems(self) -> list[str]:
        owner = type(self).__name__
        found = []
        if not isinstance(self.exe_cfg, FunctionConfig):
            found.append(f"exe_cfg is {type(self.exe_cfg).__name__}, not a flow.ExecutionConfig()")
        if self.data is None:
            found.append(f"data is not set (call {owner}.config_data(...))")
        elif not isinstance(self.data, DataModule):
            found.append(f"data is {type(self.data).__name__}, not a flow.model.DataModule")
        return found

    def check_valid(self) -> bool:
        problems = self._problems()
        self.error_msg = "; ".join(problems)
        return not problems


class TrainingConfig(_StageConfig):
    """The training job: its function config (``config_execution``) and its data (``config_data``)."""


class ValidationConfig(_StageConfig):
    """The validation job, run after every ``step_interval``-th training step (legacy's default: 10)."""

    def __init__(self) -> None:
        super().__init__()
        self.step_interval = 10

    def config_step_interval(self, step_interval: int = 1) -> None:
        self.step_interval = _interval(step_interval, "ValidationConfig.config_step_interval")

    def _problems(self) -> list[str]:
        found = super()._problems()
        if not _is_interval(self.step_interval):
            found.append(f"step_interval must be an int > 0, got {self.step_interval!r}")
        return found


class CheckpointConfig:
    """Load the variables from ``load_dirpath`` before the first step; save them every ``save_step_interval``
    steps into ``<save_dirpath>-<step index>`` (legacy's names and layout)."""

    def __init__(self) -> None:
        self.need_load = False
        self.load_dirpath: str | None = None
        self.need_save = False
        self.save_dirpath: str | None = None
        self.save_step_interval = 1
        self.error_msg = ""

    def config_load(self, dirpath: str | None = None) -> None:
        self.load_dirpath = _dirpath(dirpath, "CheckpointConfig.config_load")
        self.need_load = True

    def config_save(self, dirpath: str | None = None, step_interval: int = 1) -> None:
        self.save_dirpath = _dirpath(dirpath, "CheckpointConfig.config_save")
        self.save_step_interval = _interval(step_interval, "CheckpointConfig.config_save")
        self.need_save = True

    def check_valid(self) -> bool:
        problems = []
        if self.need_load and not isinstance(self.load_dirpath, str):
            problems.append(f"load_dirpath is {self.load_dirpath!r} (call CheckpointConfig.config_load(dirpath))")
        if self.need_save:
            if not isinstance(self.save_dirpath, str):
                problems.append(f"save_dirpath is {self.save_dirpath!r} (call CheckpointConfig.config_save(dirpath))")
            if not _is_interval(self.save_step_interval):
                problems.append(f"save_step_interval must be an int > 0, got {self.save_step_interval!r}")
        self.error_msg = "; ".join(problems)
        return not problems


__all__ = ["CheckpointConfig", "TrainingConfig", "ValidationConfig"]
