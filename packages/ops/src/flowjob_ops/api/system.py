"""``flow.system``: legacy's system namespace; ``assign`` is the only name it held in v0.3/v0.4."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob

from flowjob_ops.api._common import assign_variable


__all__ = ["assign"]


def assign(ref: Blob, value: Blob, validate_shape: Any = None, use_locking: Any = None,
                  name: str | None = None) -> Blob:
    """``flow.system.assign``: as ``flow.assign``, returning ``ref``.

    Args:
        ref: a variable (from ``flow.get_variable``).
        value: a blob of ref's shape and dtype.
        validate_shape: ignored (legacy argument; shapes are always checked).
        use_locking: ignored (legacy argument).
        name: the op name; default ``Assign_<n>``.

    Returns:
        ref.
    """
    assign_variable(ref, value, name, "flow.system.assign")
    return ref
