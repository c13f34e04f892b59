"""Legacy's ``FunctionDesc``: the read side of a function config, by option name (``desc.enable_inplace``).

``flow.current_global_function_desc()`` gives the one of the job being traced (``flowjob_core/api``), and
``function_config.function_desc`` the one of a config being filled in.
"""
from __future__ import annotations

from typing import Any

from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import ConfigSnapshot


class FunctionDesc:
    """The traced job's name, type and function config (read-only)."""

    def __init__(self, job_name: str, job_type: str, config: ConfigSnapshot) -> None:
        self.job_name = job_name
        self.job_type = job_type
        self._config = config

    def IsTrainable(self) -> bool:  # noqa: N802 (legacy name)
        """True in a ``type="train"`` global function."""
        return self.job_type == "train"

    def HasAttr(self, attr_name: str) -> bool:  # noqa: N802
        """Whether the function config set option ``attr_name`` (``"enable_auto_mixed_precision"``)."""
        return any(name == attr_name for name, _ in self._config.options)

    def __getattr__(self, attr_name: str) -> Any:
        if attr_name.startswith("_"):
            raise AttributeError(attr_name)
        if not self.HasAttr(attr_name):
            raise FlowjobError(f"global function {self.job_name!r}: its function config did not set {attr_name!r} "
                               f"(set: {', '.join(name for name, _ in self._config.options) or 'nothing'})")
        return self._config.get(attr_name)

    def __repr__(self) -> str:
        return f"FunctionDesc(job={self.job_name!r}, type={self.job_type!r})"


__all__ = ["FunctionDesc"]
