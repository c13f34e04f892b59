"""The checkpoint functions of flowjob-core a saved model is written and read with, imported in this one place:
a saved model's ``variables/`` is a checkpoint, its version folder is written beside and renamed into place as
a checkpoint is, and a killed writer's leftovers are removed as a checkpoint's are."""
from __future__ import annotations

from flowjob_core.api import checkpoint, checkpoint_files
from flowjob_core.api.checkpoint import DATA_TYPES, OUT_FILE, load, save, variable_dir

begin = checkpoint_files.begin
finish = checkpoint_files.finish
fsync_dir = checkpoint_files.fsync_dir
remove_stale = checkpoint_files.remove_stale

__all__ = ["DATA_TYPES", "OUT_FILE", "begin", "checkpoint", "finish", "fsync_dir", "load", "remove_stale", "save",
           "variable_dir"]
