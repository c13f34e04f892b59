"""Sessions with core's built-ins, the watch plugin and minimal result kinds: what the ``watch`` tox env has."""
from __future__ import annotations

import pathlib

import pytest

import flowjob_watch.plugin
from flowjob_core import JobFunction, Session, make_plugin_manager
from flowjob_core.testing.modules import sibling

_HERE = pathlib.Path(__file__).parent


@pytest.fixture
def kinds():
    return sibling(__file__, "kinds")


@pytest.fixture
def session(kinds):
    s = Session(make_plugin_manager(plugins=[kinds, flowjob_watch.plugin], autoload=False))
    yield s
    s.close()


@pytest.fixture
def define(session):
    """``define(fn, job_type="predict")``: a global function of the test session."""
    return lambda fn, job_type="predict": JobFunction(fn, job_type, None, session)
