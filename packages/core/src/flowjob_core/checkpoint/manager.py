"""``flow.train.CheckpointManager``: numbered checkpoints in one folder, the last N kept, a
``latest`` pointer file, and ``restore_latest()``.

An extension in the spirit of legacy's ``SimpleCheckPointManager`` (and TensorFlow's
``tf.train.CheckpointManager``): ``<root>/<prefix><n>`` are ordinary checkpoint folders in the
legacy layout, written by ``CheckPoint.save`` (a re-save of one number replaces it atomically);
``<root>/latest`` holds the name of the newest, replaced atomically after each save, so a kill
at any instant leaves it naming a complete checkpoint. Older checkpoints beyond
``max_to_keep`` are removed only after the pointer names the new one: each is first renamed out of the
listing (``.<name>.pruning``, one atomic rename), then deleted, so a kill while deleting never leaves a
half-removed checkpoint that ``checkpoints()`` lists; the next save deletes what such a kill left.

A numbered folder without ``snapshot_done`` (damaged, or copied in half) is no checkpoint: it is never
listed, restored or pruned, and a save numbers past it, with a ``CheckpointWarning`` naming it.
"""
from __future__ import annotations

import os
import re
import shutil
import warnings

from flowjob_core.checkpoint import atomic_replace as checkpoint_files
from flowjob_core.checkpoint.layout import DONE_FILE
from flowjob_core.checkpoint.session_checkpoint import CheckPoint
from flowjob_core.checkpoint.save_load import CheckpointWarning
from flowjob_core.errors import CheckpointError
from flowjob_core.runtime.session import Session, get_default_session
from flowjob_core.runtime.world import World, world_of

LATEST_FILE = "latest"
PRUNING_SUFFIX = ".pruning"  # .<name>.pruning: a checkpoint being deleted, out of the listing
logger = checkpoint_files.logger


class CheckpointManager:
    """Numbered checkpoints ``<root>/<prefix><n>``: ``save()``, ``restore_latest()``, ``initialize_or_restore()``.

    ``max_to_keep`` (``None``: all) is how many of the newest are kept after a save.
    """

    def __init__(self, root_path: str | os.PathLike[str], max_to_keep: int | None = 5, prefix: str = "snapshot_",
                 session: Session | None = None) -> None:
        if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
            raise CheckpointError(f"CheckpointManager: max_to_keep must be a positive int or None, got {max_to_keep!r}")
        if not prefix or os.sep in prefix or "/" in prefix or prefix.startswith("."):
            raise CheckpointError(f"CheckpointManager: prefix {prefix!r} must be a plain, visible file name part")
        self.root_path = os.fspath(root_path)
        if os.path.lexists(self.root_path) and not os.path.isdir(self.root_path):
            raise CheckpointError(f"CheckpointManager: {self.root_path!r} exists and is not a folder")
        if os.path.isfile(os.path.join(self.root_path, DONE_FILE)):
            raise CheckpointError(f"CheckpointManager: {self.root_path!r} is itself a checkpoint, not a folder of "
                                  f"checkpoints; choose another root (or move that checkpoint away)")
        try:
            os.makedirs(self.root_path, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"CheckpointManager: cannot create {self.root_path!r}: "
                                  f"{exc.strerror or exc}") from exc
        self.max_to_keep = max_to_keep
        self.prefix = prefix
        self._number = re.compile(re.escape(prefix) + r"(\d+)")
        self._checkpoint = CheckPoint(session)
        self._session = session

    def path(self, name: str) -> str:
        return os.path.join(self.root_path, name)

    def checkpoints(self) -> list[str]:
        """Names of the complete checkpoints under the root, oldest (lowest number) first."""
        found = [(int(m.group(1)), n) for n in os.listdir(self.root_path)
                 if (m := self._number.fullmatch(n)) and checkpoint_files.is_complete(self.path(n))]
        return [n for _, n in sorted(found)]

    def latest(self) -> str | None:
        """The path of the newest complete checkpoint: the one ``latest`` names, else the highest number."""
        pointer = os.path.join(self.root_path, LATEST_FILE)
        try:
            with open(pointer, encoding="utf-8") as f:
                name = f.read().strip()
        except (OSError, UnicodeDecodeError):
            name = ""
        if name and self._number.fullmatch(name) and checkpoint_files.is_complete(self.path(name)):
            return self.path(name)
        names = self.checkpoints()
        if name:
            logger.warning("%s names %r, which is not a complete checkpoint; using %s", pointer, name,
                           names[-1] if names else "none")
        return self.path(names[-1]) if names else None

    def save(self, number: int | None = None) -> str:
        """Save to ``<root>/<prefix><number>`` (default: one more than the highest), point ``latest`` at
        it, then remove the oldest beyond ``max_to_keep``; returns the path. On several ranks, rank 0 numbers it,
        points ``latest`` and prunes (``flowjob_core.runtime.world``), the save runs as ``CheckPoint.save`` does there,
        and every rank returns its path or raises its error."""
        world = self._world()
        name = world.root_only(lambda: self._next_name(number))
        # on every rank: each writes its rows of the split variables (checkpoint.split_files), rank 0 the rest
        self._checkpoint.save(self.path(name), overwrite=True)
        return world.root_only(lambda: self._keep(name))

    def _world(self) -> World:
        return world_of(self._session if self._session is not None else get_default_session())

    def _numbered(self) -> dict[int, str]:
        """Every ``<prefix><n>`` entry of the root, complete or not, by number."""
        return {int(m.group(1)): n for n in os.listdir(self.root_path) if (m := self._number.fullmatch(n))}

    def _finish_pruning(self) -> None:
        """Delete what an interrupted prune left: checkpoints renamed out of the listing but not deleted."""
        for entry in os.listdir(self.root_path):
            if entry.startswith(f".{self.prefix}") and entry.endswith(PRUNING_SUFFIX):
                shutil.rmtree(self.path(entry), ignore_errors=True)
                logger.info("removed %s, left by an interrupted prune", self.path(entry))

    def _prune(self, name: str) -> None:
        hidden = self.path(f".{name}{PRUNING_SUFFIX}")
        os.replace(self.path(name), hidden)  # out of the listing in one step
        shutil.rmtree(hidden, ignore_errors=True)

    def _next_name(self, number: int | None) -> str:
        self._finish_pruning()
        if number is None:
            numbered = self._numbered()
            complete = set(self.checkpoints())
            damaged = [n for _, n in sorted(numbered.items()) if n not in complete]
            if damaged:
                warnings.warn(f"CheckpointManager: {', '.join(self.path(n) for n in damaged)} hold no complete "
                              f"checkpoint (no {DONE_FILE}); left as they are and numbered past",
                              CheckpointWarning, stacklevel=3)
            number = max(numbered) + 1 if numbered else 1
        elif not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise CheckpointError(f"CheckpointManager.save: number must be a non-negative int, got {number!r}")
        return f"{self.prefix}{number}"

    def _keep(self, name: str) -> str:
        """After the save of ``name``: point ``latest`` at it, then prune the oldest beyond ``max_to_keep``."""
        checkpoint_files.write_small_file(os.path.join(self.root_path, LATEST_FILE), f"{name}\n".encode())
        if self.max_to_keep is not None:
            names = [n for n in self.checkpoints() if n != name]
            for old in names[:max(0, len(names) + 1 - self.max_to_keep)]:
                self._prune(old)
        return self.path(name)

    def restore_latest(self, strict: bool = False) -> str | None:
        """Load the newest complete checkpoint and return its path; ``None`` (nothing loaded) when there is none."""
        path = self._world().root_only(self.latest)  # rank 0's files decide; every rank then loads
        if path is not None:
            self._checkpoint.load(path, strict=strict)
        return path

    def initialize_or_restore(self) -> str | None:
        """``restore_latest()``, or initialize every variable when there is no checkpoint yet."""
        path = self.restore_latest()
        if path is None:
            self._checkpoint.init()
        return path


__all__ = ["CheckpointManager"]
