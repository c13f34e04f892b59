"""Variables written in place: ``flow.assign`` overwrites a variable with a value when the job runs."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob

from flowjob_ops.api._common import assign_variable


__all__ = ["assign"]


def assign(ref: Blob, value: Blob, dtype: Any = None, name: str | None = None) -> None:
    """Overwrite the variable ``ref`` with ``value`` when the job runs (after every other reader of
    ref in that step; later steps and jobs see the new value).

    Args:
        ref: a variable (from ``flow.get_variable``).
        value: a blob of ref's shape and dtype.
        dtype: ignored (legacy argument).
        name: the op name; default ``Assign_<n>``.
    """
    assign_variable(ref, value, name, "flow.assign")
