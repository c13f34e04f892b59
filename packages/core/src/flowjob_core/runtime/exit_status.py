"""A process whose last job errors surface only at interpreter exit ends with status 1, not 0.

Python ignores what an ``atexit`` handler raises (``SystemExit`` included) and keeps status 0, so a
script whose final asynchronous step or callback failed would look successful to a shell or CI.
The session's exit handler logs such an error and calls :func:`fail`. The handler here is registered by
:func:`arm`, which the first session calls as it is made (nothing is registered at import), before any
session's own exit handler, and ``atexit`` runs handlers last-registered first, so it runs after every
session finished: it flushes logging and the standard streams and ends the process with status 1 through
``os._exit``. That skips only the exit handlers registered before the first session was made.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import threading

EXIT_STATUS = 1

_failed = threading.Event()
_armed = False
_arm_lock = threading.Lock()


def arm() -> None:
    """Register the exit handler, once (the first session calls it as it is made)."""
    global _armed
    with _arm_lock:
        if not _armed:
            atexit.register(_finish)
            _armed = True


def fail() -> None:
    """Make the process end with status 1 (an error was left at exit)."""
    _failed.set()


def failed() -> bool:
    return _failed.is_set()


def _finish() -> None:
    if not _failed.is_set():
        return
    logging.shutdown()  # the handler that would flush it is among those os._exit skips
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be written
            pass
    os._exit(EXIT_STATUS)
