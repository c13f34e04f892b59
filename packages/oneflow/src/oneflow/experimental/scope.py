"""``flow.experimental.scope``: v0.4's ``config`` (legacy's scope attributes, see
``flowjob_core.config.scope_config``); for programs written ``import oneflow.experimental as flow``, every
other name is ``flow.scope``'s (``flow.scope.placement``, ``namespace``, ...)."""
from typing import Any

import oneflow
from flowjob_core.config.scope_config import config

__all__ = ["config"]


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module 'oneflow.experimental.scope' has no attribute {name!r}")
    return getattr(oneflow.scope, name)
