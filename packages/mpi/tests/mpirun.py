"""Run a worker script on N ranks (never pytest itself under mpiexec), with a time limit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flowjob_mpi.launch import find_mpiexec

WORKERS = Path(__file__).parent / "workers"


def ranks(n: int, worker: str, *args: object, timeout: float = 60, cwd: object = None,
          launcher: str = "mpiexec") -> subprocess.CompletedProcess:
    """``mpiexec -n N python WORKER ARGS`` (``launcher="launch"``: ``python -m oneflow launch -n N WORKER ARGS``);
    ``n == 0``: the worker alone, a world of one."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [sys.executable, str(WORKERS / worker), *map(str, args)]
    if n and launcher == "launch":
        command = [sys.executable, "-m", "oneflow", "launch", "-n", str(n), *command[1:]]
    elif n:
        command = [find_mpiexec(), "-n", str(n), *command]
    # its own process group: at the time limit the launcher and every rank end, none is left spinning
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):
    """``get(optimizer, batch, steps, loss)``: one process's results of workers/train.py (cached per module)."""
    cache: dict = {}

    def get(optimizer: str, batch: int, steps: int, loss: str) -> dict:
        key = (optimizer, batch, steps, loss)
        if key not in cache:
            out = tmp_path_factory.mktemp("one")
            ok(ranks(0, "train.py", optimizer, batch, steps, out, loss))
            cache[key] = dict(np.load(out / "result.npz"))
        return cache[key]

    return get
