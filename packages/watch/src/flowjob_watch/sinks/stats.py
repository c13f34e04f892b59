"""The ``stats`` sink: per step mean, std, min, max and NaN / Inf counts of each watched value.

Statistics are over the finite elements (so one NaN does not hide the rest); ``nan`` and
``inf`` count the others. Rows are kept in memory (``history``, the last ``keep`` per label)
and, with ``log=True``, logged to the ``flowjob.watch`` logger at INFO. With
``raise_on_nonfinite=True`` the first non-finite value raises ``NonFiniteError`` naming the
blob, the job and the step; like any handler error it is raised at the session's next
synchronous point, and the session keeps working.
"""
from __future__ import annotations

import collections
import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from flowjob_core import FlowjobError

from flowjob_watch.sinks.base import Sink, label, logical

logger = logging.getLogger("flowjob.watch")


class NonFiniteError(FlowjobError, FloatingPointError):
    """A watched value held NaN or Inf (``Stats(raise_on_nonfinite=True)``)."""


@dataclass(frozen=True)
class StatsRow:
    step: int
    mean: float
    std: float
    min: float
    max: float
    nan: int
    inf: int
    size: int

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0


def summarize(array: np.ndarray, step: int) -> StatsRow:
    """The row of one value: statistics over the finite elements, counts of the rest."""
    a = np.asarray(array)
    nan = inf = 0
    if a.dtype.kind in "fc":
        finite = np.isfinite(a)
        if not finite.all():
            nan = int(np.isnan(a).sum())
            inf = int(a.size - finite.sum()) - nan
            a = a[finite]
    if a.size == 0:
        return StatsRow(step, math.nan, math.nan, math.nan, math.nan, nan, inf, int(np.asarray(array).size))
    return StatsRow(step, float(a.mean()), float(a.std()), float(a.min()), float(a.max()), nan, inf,
                    int(np.asarray(array).size))


class Stats(Sink):
    """Statistics of every watched value, per step."""

    def __init__(self, *, raise_on_nonfinite: bool = False, log: bool = False, keep: int = 10_000) -> None:
        self.raise_on_nonfinite = raise_on_nonfinite
        self.log = log
        self.keep = keep
        self.history: dict[str, collections.deque[StatsRow]] = {}
        self._steps: dict[str, int] = {}
        self._lock = threading.Lock()

    def consume(self, value: Any, blob_def: Any, *, diff: bool = False) -> None:
        key = label(blob_def, diff)
        with self._lock:
            step = self._steps.get(key, 0)
            self._steps[key] = step + 1
        row = summarize(logical(value, blob_def), step)
        with self._lock:
            self.history.setdefault(key, collections.deque(maxlen=self.keep)).append(row)
        if self.log:
            logger.info("%s step %d: mean=%.6g std=%.6g min=%.6g max=%.6g nan=%d inf=%d", key, step, row.mean,
                        row.std, row.min, row.max, row.nan, row.inf)
        if self.raise_on_nonfinite and not row.finite:
            raise NonFiniteError(f"watched {'gradient of ' if diff else ''}blob {blob_def.lbn!r} of job "
                                 f"{blob_def.job_name!r} holds {row.nan} NaN and {row.inf} Inf value(s) "
                                 f"at step {step}")

    def last(self, key: str) -> StatsRow:
        """The latest row of a label (``lbn`` or ``lbn:diff``)."""
        try:
            return self.history[key][-1]
        except (KeyError, IndexError):
            raise KeyError(f"no statistics for {key!r}; watched: {sorted(self.history)}") from None


def make_stats(target: Any = None, **options: Any) -> Stats:
    """Factory of the ``stats`` sink. Made by name (``sink="stats"``) it logs unless ``log=False``:
    nobody else holds the object to read its history."""
    if isinstance(target, Stats):
        return target
    if target is not None:
        raise TypeError(f"the stats sink takes options only (raise_on_nonfinite=, log=, keep=), got {target!r}")
    options.setdefault("log", True)
    return Stats(**options)
