"""One check of a device script at a time, each reported on its own line as it ends, failures counted.

``check(label, attempt)`` runs ``attempt()``: it prints ``ok   label: <what it returned> (seconds)`` or
``FAIL label: <error> (at file:line)`` and goes on to the next check either way; ``failures`` lists the labels
that failed, for the script's closing line and exit status.
"""
from __future__ import annotations

import time
import traceback
from typing import Any, Callable

failures: list[str] = []


def check(label: str, attempt: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        shown = attempt()
    except Exception as exc:  # every failure is reported, then the next check runs
        failures.append(label)
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        print(f"FAIL {label}: {type(exc).__name__}: {str(exc)[:400]} (at {frame.filename.rsplit('/', 1)[-1]}:"
              f"{frame.lineno})", flush=True)
        return None
    print(f"ok   {label}: {shown} ({time.perf_counter() - start:.2f} s)", flush=True)
    return shown
