"""A pytest plugin for the device check: each failure's report appended to ``$FAILURE_LOG`` as it happens,
so a run stopped at its time limit still leaves the failures it saw (``-p failure_log``, bench/ on the path).
Under pytest-xdist only the controller writes (a worker's reports reach it too)."""
from __future__ import annotations

import os
from typing import Any

_config: Any = None


def pytest_configure(config: Any) -> None:
    global _config
    _config = config


def _log(report: Any, when: str) -> None:
    path = os.environ.get("FAILURE_LOG")
    if not path or not report.failed or hasattr(_config, "workerinput"):
        return
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"=== {report.nodeid} [{when}]\n{report.longreprtext[-3000:]}\n")


def pytest_runtest_logreport(report: Any) -> None:
    _log(report, report.when)


def pytest_collectreport(report: Any) -> None:  # a module that fails to import counts as an error
    _log(report, "collect")
