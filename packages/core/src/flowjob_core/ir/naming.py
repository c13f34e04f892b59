"""Legacy naming: one process-wide counter shared by every unnamed op (``Relu_3``, ``Dense_6``).

Legacy OneFlow never reset it, not even in ``clear_default_session``; programs that print
logical blob names depend on that, so the counter lives for the process, created on first use.
"""
from __future__ import annotations

import itertools
import threading

_lock = threading.Lock()
_counter: itertools.count | None = None


def next_id() -> int:
    global _counter
    with _lock:
        if _counter is None:
            _counter = itertools.count()
        return next(_counter)


def unique_name(prefix: str) -> str:
    """``prefix`` followed by the next value of the process-wide counter."""
    return f"{prefix}_{next_id()}"


TRAIN_STEP_PREFIX = "System-Train-TrainStep-"


def train_step_name(job_name: str) -> str:
    """Legacy's name of a train job's step counter variable (int64, shape (1,), from 0): the optimizer pass
    adds it, and a pass before it that reads the step (quantization-aware training) declares it first."""
    return f"{TRAIN_STEP_PREFIX}{job_name}"
