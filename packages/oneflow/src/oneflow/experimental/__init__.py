"""``flow.experimental`` (from flowjob-ops): the v0.4 names lazy jobs use (``unique_with_counts``,
``square_sum``, ``indexed_slices_reduce_sum``, ``ssp_variable_proxy``) and ``flow.experimental.scope.config``
(legacy's scope attributes: ``oneflow.experimental.scope``).

v0.4 gave ``oneflow.experimental`` every top-level name besides its own, and its eager programs were written
``import oneflow.experimental as flow`` (``flow.nn.Module``, ``flow.unittest``): a name not defined here is
the top-level one."""
from typing import Any

import oneflow
from oneflow._exports import export, ops

SOURCES = (ops("unique"), ops("square_sum"), ops("indexed_slices"), ops("ssp"))

__all__ = export(globals(), "flow.experimental", *SOURCES)

from oneflow.experimental import scope  # noqa: E402 (the submodule, over flow.scope's fallback)

__all__ += ["scope"]


def __getattr__(name: str) -> Any:
    if name.startswith("_"):  # private and dunder probes (copy, pickle) stay AttributeErrors
        raise AttributeError(f"module 'oneflow.experimental' has no attribute {name!r}")
    return getattr(oneflow, name)
