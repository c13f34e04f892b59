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
