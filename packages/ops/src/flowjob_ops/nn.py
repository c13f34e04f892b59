"""``flow.nn``: neural-network ops."""
from __future__ import annotations

from typing import Any

from flowjob_core import Blob, apply


def relu(x: Blob, name: str | None = None) -> Blob:
    """max(x, 0), elementwise."""
    return apply("relu", [x], name=name)


__all__ = ["relu"]
