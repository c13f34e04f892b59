"""The checkpoint functions of flowjob-core a saved model is written and read with, imported in this one place:
a saved model's ``variables/`` is a checkpoint, its version folder is written beside and renamed into place as
a checkpoint is, and a killed writer's leftovers are removed as a checkpoint's are."""
from __future__ import annotations

from flowjob_core.checkpoint import atomic_replace
from flowjob_core.checkpoint.layout import DATA_TYPES, OUT_FILE, variable_dir
from flowjob_core.checkpoint.save_load import load, save

begin = atomic_replace.begin
finish = atomic_replace.finish
fsync_dir = atomic_replace.fsync_dir
remove_stale = atomic_replace.remove_stale

__all__ = ["DATA_TYPES", "OUT_FILE", "begin", "finish", "fsync_dir", "load", "remove_stale", "save", "variable_dir"]
