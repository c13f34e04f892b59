"""pytest plugin installed with flowjob-core: hypothesis profiles, the ``gpu``/``slow`` markers and fixtures.

Profiles: ``ci`` (derandomized, no deadline; chosen when ``CI`` is set) and ``dev``
(the default locally); ``HYPOTHESIS_PROFILE`` picks one explicitly.
Fixture ``flowjob_session``: a fresh ``Session()`` (every installed plugin), closed after the test.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

import pytest


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "slow: long running (the slow tox environment runs them)")
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # hypothesis is only needed by property tests
        return
    settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True,
                              max_examples=25, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, max_examples=50)
    in_ci = os.environ.get("CI") or os.environ.get("__TOX_ENVIRONMENT_VARIABLE_ORIGINAL_CI")
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if in_ci else "dev"))


@pytest.fixture
def flowjob_session() -> Iterator[Any]:
    """A fresh session for one test; pending work is finished and the session closed afterwards."""
    from flowjob_core.session import Session

    session = Session()
    try:
        yield session
    finally:
        session.close()
