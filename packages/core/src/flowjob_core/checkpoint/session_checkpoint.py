"""Legacy's checkpoint objects: ``flow.train.CheckPoint`` and ``flow.train.SimpleCheckPointManager``."""
from __future__ import annotations

import datetime
import os

from flowjob_core.checkpoint.layout import DONE_FILE
from flowjob_core.checkpoint.save_load import initialize, load, prepare, save
from flowjob_core.errors import CheckpointError
from flowjob_core.runtime.session import Session, get_default_session

# where flow.config.enable_legacy_model_io(...) keeps its value: the session's config options
LEGACY_MODEL_IO_OPTION = "flow.config.enable_legacy_model_io"


def legacy_model_io(session: Session) -> bool:
    """What ``flow.config.enable_legacy_model_io`` was set to in ``session`` (legacy default: True)."""
    return bool(session.config.options.get(LEGACY_MODEL_IO_OPTION, True))


class CheckPoint:
    """``flow.train.CheckPoint()``: ``init()``, ``save(path)``, ``load(path)`` for every variable of the session.

    Each first finishes the steps already launched and traces and plans every defined job
    (a job replaced by one of the same name included), so every variable exists. After
    ``flow.config.enable_legacy_model_io(False)`` they act as legacy v0.4's model I/O v2 did:
    ``init()`` initializes nothing (variables already are), ``load`` keeps the value of a variable
    the checkpoint lacks (as ``flow.load_variables(flow.checkpoint.get(path))``).
    """

    def __init__(self, session: Session | None = None) -> None:
        self._session = session

    def _current(self) -> Session:
        return self._session if self._session is not None else get_default_session()

    def init(self) -> None:
        if legacy_model_io(self._current()):
            initialize(self._session)
        else:
            prepare(self._current())

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        save(path, self._session, overwrite=overwrite)

    def load(self, path: str | os.PathLike[str], strict: bool = False) -> None:
        load(path, self._session, strict=strict, keep_missing=not legacy_model_io(self._current()))


class SimpleCheckPointManager:
    """``flow.train.SimpleCheckPointManager(root_path, prefix="snapshot_")``: timestamped checkpoints in one folder."""

    def __init__(self, root_path: str | os.PathLike[str], prefix: str = "snapshot_",
                 session: Session | None = None) -> None:
        self.root_path = os.fspath(root_path)
        if os.path.exists(self.root_path) and not os.path.isdir(self.root_path):
            raise CheckpointError(f"SimpleCheckPointManager: {self.root_path!r} exists and is not a folder")
        os.makedirs(self.root_path, exist_ok=True)
        self.prefix = prefix
        self._checkpoint = CheckPoint(session)

    def _path(self, name: str) -> str:
        return os.path.join(self.root_path, name)

    def list_checkpoints(self) -> list[str]:
        """Names of the complete checkpoints (with ``snapshot_done``) under the root, sorted."""
        return sorted(n for n in os.listdir(self.root_path)
                      if n.startswith(self.prefix) and not n.startswith(".")
                      and os.path.isfile(os.path.join(self._path(n), DONE_FILE)))

    def latest_checkpoint(self) -> str | None:
        names = self.list_checkpoints()
        return names[-1] if names else None

    def initialize_or_restore(self) -> None:
        """Load the latest checkpoint, or initialize every variable when there is none."""
        name = self.latest_checkpoint()
        if name is None:
            self._checkpoint.init()
        else:
            self._checkpoint.load(self._path(name))

    def save(self) -> None:
        """Save to ``<root>/<prefix><YYYYmmdd_HHMMSS_ffffff>``."""
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        self._checkpoint.save(self._path(f"{self.prefix}{stamp}"))


__all__ = ["CheckPoint", "SimpleCheckPointManager", "legacy_model_io"]
