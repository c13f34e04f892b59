"""The kit's pytest plugin, opt-in: the ``gpu``/``slow`` markers, the hypothesis profile and a fixture.

flowjob-core does not install it as a ``pytest11`` entry point: a plugin loaded by every pytest
run of the environment would load our hypothesis profile over another project's own. A test
suite opts in from its rootdir conftest::

    pytest_plugins = ["flowjob_core.testing.pytest_plugin"]

pytest accepts ``pytest_plugins`` only in the conftests it loads before configuring (the one at
the rootdir, or in a folder named on the command line); a conftest further down, such as a
plugin's ``tests/conftest.py`` collected from a larger repository, calls
``flowjob_core.testing.load_profile()`` from its own ``pytest_configure`` instead.

Profiles (``flowjob_core.testing.profiles``): ``ci`` (derandomized, no deadline; chosen when
``CI`` is set), ``dev`` (the default locally) and ``nightly`` (random draws, 400 examples per op, for a
scheduled run); ``HYPOTHESIS_PROFILE`` picks one explicitly.
Fixture ``flowjob_session``: a fresh ``Session()`` (every installed plugin), closed after the test.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "slow: long running (the slow tox environment runs them)")
    try:
        import hypothesis  # noqa: F401  (only property tests need it)
    except ImportError:
        return
    from flowjob_core.testing.profiles import load_profile

    load_profile()


@pytest.fixture
def flowjob_session() -> Iterator[Any]:
    """A fresh session for one test; pending work is finished and the session closed afterwards."""
    from flowjob_core.runtime.session import Session

    session = Session()
    try:
        yield session
    finally:
        session.close()
