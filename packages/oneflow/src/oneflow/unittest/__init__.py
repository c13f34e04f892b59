"""``flow.unittest``: legacy OneFlow's helpers for test suites written with ``unittest``.

``TestCase`` starts every test on a fresh default session; the ``skip_unless_<n>n<d>d()``
decorators skip a test (or a whole class) unless the run has ``n`` machines with ``d`` devices each.
Legacy ran a test only where the counts matched exactly (one CI run per size); here a test runs
wherever the run has at least what it needs, and the skip reason says what is missing and how to
provide it. The decision is taken when the decorator is applied, as in legacy, so a module that
calls ``flow.config.cpu_device_num(2)`` before its classes gets its two-device tests run.
"""
from __future__ import annotations

import importlib.util
import os
import unittest
from typing import Any, Callable, TypeVar

from flowjob_core import clear_default_session
from flowjob_core.errors import ConfigError

from oneflow.unittest import env

__all__ = [
    "TestCase", "env", "num_nodes_required", "register_test_cases", "skip_unless_1n1d", "skip_unless_1n2d",
    "skip_unless_1n4d", "skip_unless_2n1d", "skip_unless_2n2d", "skip_unless_2n4d",
]

T = TypeVar("T")


class TestCase(unittest.TestCase):
    """A ``unittest.TestCase`` whose tests each start on a new default session (jobs, variables
    and ``flow.config`` settings of earlier tests are gone)."""

    def setUp(self) -> None:
        if env.eager_execution_enabled():  # running the lazy path instead would test the wrong thing
            raise ConfigError(f"flow.unittest.TestCase: {env.EAGER_VAR}=1 asks for eager execution, "
                              "which this build does not have (jobs run in lazy mode)")
        clear_default_session()


NUM_NODES_ATTRIBUTE = "__oneflow_test_case_num_nodes_required__"


def num_nodes_required(num_nodes: int) -> Callable[[T], T]:
    """Mark a test function with the machines it needs, for :func:`register_test_cases`'s filter
    (unmarked tests need one)."""
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ConfigError(f"flow.unittest.num_nodes_required: num_nodes must be an int >= 1, got {num_nodes!r}")

    def mark(test: T) -> T:
        setattr(test, NUM_NODES_ATTRIBUTE, num_nodes)
        return test

    return mark


class _ClearDefaultSession:
    """Legacy's mixin of registered test classes: each test starts on a new default session."""

    def setUp(self) -> None:  # noqa: N802 (unittest's name)
        clear_default_session()


def register_test_cases(scope: dict[str, Any], directory: str, filter_by_num_nodes: Callable[[int], bool],
                        base_class: type = unittest.TestCase, test_case_mixin: type = _ClearDefaultSession) -> None:
    """Legacy's suite builder: for each ``test*.py`` file in ``directory``, a ``unittest`` class named after the
    file is put in ``scope``, holding the file's module-level ``test*`` functions whose required machine
    count (:func:`num_nodes_required`, default 1) passes ``filter_by_num_nodes``."""
    if not os.path.isdir(directory):
        raise ConfigError(f"flow.unittest.register_test_cases: {directory!r} is not a folder")
    for file_name in sorted(os.listdir(directory)):
        path = os.path.join(directory, file_name)
        if not (file_name.startswith("test") and file_name.endswith(".py") and os.path.isfile(path)):
            continue
        class_name = file_name[:-3]
        spec = importlib.util.spec_from_file_location(class_name, path)
        assert spec is not None and spec.loader is not None  # a .py file always has a source loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        methods = {name: value for name, value in vars(module).items()
                   if name.startswith("test") and callable(value)
                   and filter_by_num_nodes(getattr(value, NUM_NODES_ATTRIBUTE, 1))}
        scope[class_name] = type(class_name, (test_case_mixin, base_class), methods)


def skip_unless(node_size: int, device_num: int) -> Callable[[T], T]:
    """Run the decorated test or class when the run has ``node_size`` machines with at least
    ``device_num`` devices each; otherwise skip it, saying what is missing."""
    nodes, devices = env.node_size(), env.device_num()
    missing = []
    if nodes < node_size:
        missing.append(f"this run has {nodes} node(s): start one rank per node with "
                       f"python -m oneflow launch -n {node_size} (flowjob-mpi)")
    if devices < device_num:
        missing.append(f"this run has {devices} device(s): set {env.DEVICE_NUM_VAR}={device_num} or call "
                       f"flow.config.cpu_device_num({device_num}) before the test is defined")
    if not missing:
        return lambda test: test
    return unittest.skip(f"needs {node_size} node(s) with {device_num} device(s) each; " + "; ".join(missing))


def skip_unless_1n1d() -> Callable[[T], T]:
    return skip_unless(1, 1)


def skip_unless_1n2d() -> Callable[[T], T]:
    return skip_unless(1, 2)


def skip_unless_1n4d() -> Callable[[T], T]:
    return skip_unless(1, 4)


def skip_unless_2n1d() -> Callable[[T], T]:
    return skip_unless(2, 1)


def skip_unless_2n2d() -> Callable[[T], T]:
    return skip_unless(2, 2)


def skip_unless_2n4d() -> Callable[[T], T]:
    return skip_unless(2, 4)
