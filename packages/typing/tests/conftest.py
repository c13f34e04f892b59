"""A session with core's built-ins and the typing plugin only: what the ``typing`` tox env installs."""
from __future__ import annotations

import pytest

import flowjob_typing.plugin
from flowjob_core import JobFunction, Session, make_plugin_manager


@pytest.fixture
def session():
    s = Session(make_plugin_manager(plugins=[flowjob_typing.plugin], autoload=False))
    yield s
    s.close()


@pytest.fixture
def define(session):
    """``define(fn, type="predict")``: a global function of the test session."""
    return lambda fn, job_type="predict": JobFunction(fn, job_type, None, session)
