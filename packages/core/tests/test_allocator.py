"""Allocator tuning is opt-in: a session leaves the process's malloc alone unless asked."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

# Make a session, use its backend, then allocate and free 400 MB in 4 MB arrays (above
# glibc's default mmap threshold, so untuned malloc gives them back when freed) and print
# the resident set growth in MB that remains, and whether the tuning is in effect.
_PROBE = """
import numpy as np
from flowjob_core import Session
from flowjob_core.backends import numpy_backend

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * {page} / 2**20

session = Session()
session.backend
base = rss_mb()
blocks = [np.ones(2**20, np.float32) for _ in range(100)]
del blocks
print(round(rss_mb() - base), numpy_backend.malloc_tuned())
session.close()
"""

on_glibc_linux = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _probe(**env: str) -> tuple[int, bool]:
    code = _PROBE.format(page=os.sysconf("SC_PAGE_SIZE"))
    out = subprocess.run([sys.executable, "-c", code], env=os.environ | env, capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]), out[1] == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm (Linux only)")
def test_a_session_returns_freed_memory_by_default() -> None:
    kept_mb, tuned = _probe(FLOWJOB_MALLOC_TUNING="0")
    assert not tuned
    assert kept_mb < 50, f"{kept_mb} MB of 400 MB freed stayed resident"


@pytest.mark.skipif(not on_glibc_linux, reason="mallopt is glibc's; reads /proc/self/statm (Linux only)")
def test_opting_in_keeps_freed_memory_for_reuse() -> None:
    # the other side of the same measurement: the probe does see the difference
    kept_mb, tuned = _probe(FLOWJOB_MALLOC_TUNING="1")
    assert tuned
    assert kept_mb > 300, f"only {kept_mb} MB stayed resident with the tuning on"


def test_tuning_is_off_unless_asked_and_sticks_once_applied() -> None:
    code = ("from flowjob_core.backends import numpy_backend as nb; nb.make_backend(); off = nb.malloc_tuned(); "
            "on = nb.tune_malloc(True); nb.make_backend(); print(off, on, nb.malloc_tuned())")
    env = {k: v for k, v in os.environ.items() if k != "FLOWJOB_MALLOC_TUNING"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    expected = "True" if on_glibc_linux else "False"
    assert out == ["False", expected, expected]
