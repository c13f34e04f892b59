"""``flow.inter_job_reuse_mem_strategy``: legacy's memory sharing between the jobs of a session.

Legacy's runtime let jobs that never run at the same time share memory (``reuse_mem_priority``), or kept them
apart so they could run in parallel (``parallelism_priority``, ``custom_parallelism`` by groups of job names).
flowjob plans each job's buffers on its own and runs steps one at a time per session, so the strategy is
checked as legacy checked it and changes nothing (a documented no-op).
"""
from __future__ import annotations

from typing import Any

from flowjob_core.errors import ConfigError

STRATEGIES = ("reuse_mem_priority", "parallelism_priority", "custom_parallelism")


def inter_job_reuse_mem_strategy(strategy_str: str, job_set: Any = None, **kwargs: Any) -> None:
    """Checked and ignored: ``strategy_str`` one of ``STRATEGIES``; ``custom_parallelism`` takes
    ``job_name_groups``, a list of lists of job names (str)."""
    what = "flow.inter_job_reuse_mem_strategy"
    if strategy_str not in STRATEGIES:
        raise ConfigError(f"{what}: strategy_str must be one of {STRATEGIES}, got {strategy_str!r}")
    if job_set is not None:
        raise ConfigError(f"{what}: job_set (legacy's JobSet message) is not supported; leave it None")
    if strategy_str == "custom_parallelism":
        groups = kwargs.get("job_name_groups")
        if not isinstance(groups, (list, tuple)) or not all(
                isinstance(g, (list, tuple)) and all(isinstance(n, str) for n in g) for g in groups):
            raise ConfigError(f"{what}: custom_parallelism needs job_name_groups, a list of lists of job names, "
                              f"got {groups!r}")
