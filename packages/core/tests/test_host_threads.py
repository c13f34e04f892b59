"""The numpy backend's host-thread split (``Backend.parallel``) and its switch."""
from __future__ import annotations

import threading

import pytest

from flowjob_core import ConfigError
from flowjob_core.backends.host_threads import HostThreads, cpu_count, host_thread_count
from flowjob_core.plugins.registry import split_serially
from flowjob_core.backends.numpy_backend import make_backend
from flowjob_core.plugins.registry import Backend


def _threads(monkeypatch, count: int) -> HostThreads:
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(count))
    return HostThreads()


@pytest.mark.parametrize("threads, count", [(1, 10), (2, 10), (3, 10), (4, 2), (2, 1), (2, 0)])
def test_split_covers_the_range_once_in_contiguous_parts(monkeypatch, threads, count):
    host = _threads(monkeypatch, threads)
    parts: list[tuple[int, int]] = []
    lock = threading.Lock()

    def body(start: int, stop: int) -> None:
        with lock:
            parts.append((start, stop))

    host.split(body, count)
    covered = sorted(parts)
    assert [i for a, b in covered for i in range(a, b)] == list(range(count))
    assert len(parts) == max(1, min(threads, count))


def test_split_runs_the_parts_on_distinct_threads_and_reraises(monkeypatch):
    host = _threads(monkeypatch, 2)
    seen: set[int] = set()
    barrier = threading.Barrier(2, timeout=10)

    def body(start: int, stop: int) -> None:
        seen.add(threading.get_ident())
        barrier.wait()  # both parts are in flight at once, or this times out
        if start > 0:
            raise ValueError(f"part {start}:{stop} failed")

    with pytest.raises(ValueError, match="part 5:10 failed"):
        host.split(body, 10)
    assert len(seen) == 2
    done: list[tuple[int, int]] = []
    host.split(lambda a, b: done.append((a, b)), 4)  # still usable after a failure
    assert sorted(done) == [(0, 2), (2, 4)]


def test_thread_count_follows_the_switch_then_the_blas_variables(monkeypatch):
    for variable in ("FLOWJOB_HOST_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)
    assert host_thread_count() == cpu_count()  # every CPU the process may run on, as PyTorch counts
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert host_thread_count() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert host_thread_count() == 3
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    assert host_thread_count() == 2


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_thread_count_names_the_switch(monkeypatch, raw):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", raw)
    with pytest.raises(ConfigError, match="FLOWJOB_HOST_THREADS"):
        host_thread_count()


def test_backends_split_serially_unless_they_say_otherwise():
    assert Backend(tag="x", name="x", xp=None).parallel is split_serially
    parts: list[tuple[int, int]] = []
    make_backend().parallel(lambda a, b: parts.append((a, b)), 1)
    assert parts == [(0, 1)]


def test_the_other_threads_run_under_the_callers_numpy_error_state(monkeypatch):
    import numpy as np

    host = _threads(monkeypatch, 2)
    seen: list[dict] = []
    lock = threading.Lock()

    def body(start: int, stop: int) -> None:
        with lock:
            seen.append(np.geterr())

    with np.errstate(invalid="raise", divide="ignore"):
        host.split(body, 2)
    assert len(seen) == 2
    assert all(state["invalid"] == "raise" and state["divide"] == "ignore" for state in seen)


EXIT_PROGRAM = """
import atexit, os
os.environ["FLOWJOB_HOST_THREADS"] = "2"
from flowjob_core.backends.host_threads import HostThreads

host = HostThreads()
parts = []
host.split(lambda a, b: parts.append((a, b)), 4)  # the pool exists before the program ends


def at_exit():  # as a step launched with async_get and finished by the session's exit handler
    done = []
    host.split(lambda a, b: done.extend(range(a, b)), 6)
    print("covered", sorted(done))


atexit.register(at_exit)
"""


def test_a_split_at_interpreter_exit_runs_on_the_calling_thread(tmp_path):
    import subprocess
    import sys

    program = tmp_path / "program.py"
    program.write_text(EXIT_PROGRAM)
    proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "covered [0, 1, 2, 3, 4, 5]" in proc.stdout, proc.stdout + proc.stderr
