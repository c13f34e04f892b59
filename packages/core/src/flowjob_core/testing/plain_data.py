"""Whether a job is plain data: what a test asserts of any job that tracing, a pass or a plugin makes.

A job names the Python objects it needs (optimizers, schedules, regularizers, sinks, handlers) by
keys of its global function's bindings; what it holds itself is strings, numbers, numpy dtypes,
scalars and arrays, core's dataclass records (the IR's, a placement) and lists, tuples, sets and
dicts of them.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from flowjob_core.passes.pipeline import PassContext, run_passes

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction
    from flowjob_core.ir.job import Job

LEAVES = (str, bytes, int, float, bool, complex, type(None), np.dtype, np.generic, np.ndarray)


def objects_in(value: Any, path: str = "job") -> list[str]:
    """``path: repr`` of every callable, and every object that is neither a leaf, a container nor one of
    core's dataclass records, reachable from ``value`` through record fields and containers."""
    found: list[str] = []
    seen: set[int] = set()

    def walk(item: Any, where: str) -> None:
        if isinstance(item, LEAVES) or id(item) in seen:
            return
        seen.add(id(item))
        if callable(item):
            found.append(f"{where}: {item!r}")
        elif _is_core_record(item):
            for f in dataclasses.fields(item):
                walk(getattr(item, f.name), f"{where}.{f.name}")
        elif isinstance(item, dict):
            for key, entry in item.items():
                walk(key, f"{where} key {key!r}")
                walk(entry, f"{where}[{key!r}]")
        elif isinstance(item, (list, tuple, set, frozenset)):
            for i, entry in enumerate(item):
                walk(entry, f"{where}[{i}]")
        else:
            found.append(f"{where}: {type(item).__module__}.{type(item).__qualname__} {item!r}")

    walk(value, path)
    return found


def traced_and_passed(fn: "JobFunction") -> tuple["Job", "Job"]:
    """``fn``'s traced job and its job after every pass (run with ``fn``'s bindings, as planning does),
    each asserted to be plain data: nothing ``objects_in`` finds, and a deep copy equal to it."""
    session = fn.session
    traced = fn.ensure_traced()
    final = run_passes(traced, PassContext(session, session.registries, session.backend, fn.bindings))
    for job in (traced, final):
        assert objects_in(job) == [], f"job {job.name!r} holds objects: {objects_in(job)}"
        clone = copy.deepcopy(job)
        assert clone == job and clone is not job, f"job {job.name!r}: a deep copy differs"
    return traced, final


def _is_core_record(value: Any) -> bool:
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)
            and type(value).__module__.startswith("flowjob_core."))


__all__ = ["LEAVES", "objects_in", "traced_and_passed"]
