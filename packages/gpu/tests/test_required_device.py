"""``FLOWJOB_REQUIRE_GPU=1`` (the device check sets it): a run of the gpu-marked tests without CuPy or a device is
an error, not a row of skips that reads as green."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from flowjob_gpu import available_cupy

TESTS = pathlib.Path(__file__).parent


def _run(require: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FLOWJOB_REQUIRE_GPU"}
    if require is not None:
        env["FLOWJOB_REQUIRE_GPU"] = require
    return subprocess.run([sys.executable, "-m", "pytest", str(TESTS / "test_random_streams.py"), "-q",
                           "-p", "no:cacheprovider"], capture_output=True, text=True, env=env, timeout=300,
                          cwd=TESTS.parents[2])


def test_required_gpu_tests_fail_the_run_where_there_is_no_device():
    done = _run("1")
    if available_cupy() is None:
        assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
        assert "FLOWJOB_REQUIRE_GPU=1" in done.stdout + done.stderr and "gpu-marked" in done.stdout + done.stderr
    else:  # with a device the gpu-marked tests run
        assert done.returncode == 0 and "skipped" not in done.stdout, done.stdout


def test_without_the_switch_the_gpu_tests_skip_where_there_is_no_device():
    done = _run(None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("skipped" in done.stdout) == (available_cupy() is None), done.stdout
