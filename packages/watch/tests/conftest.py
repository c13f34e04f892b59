"""Sessions with core's built-ins, the watch plugin and minimal result kinds: what the ``watch`` tox env has."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

import flowjob_watch.plugin
from flowjob_core import JobFunction, Session, make_plugin_manager

_HERE = pathlib.Path(__file__).parent


def _kinds():
    # tests run with --import-mode=importlib: load the sibling module by path, once
    name = "flowjob_watch_test_kinds"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE / "kinds.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def kinds():
    return _kinds()


@pytest.fixture
def session(kinds):
    s = Session(make_plugin_manager(plugins=[kinds, flowjob_watch.plugin], autoload=False))
    yield s
    s.close()


@pytest.fixture
def define(session):
    """``define(fn, job_type="predict")``: a global function of the test session."""
    return lambda fn, job_type="predict": JobFunction(fn, job_type, None, session)
