"""Opt into the testing kit's hypothesis profile (``ci`` under CI, ``dev`` locally).

This conftest is not at the rootdir when a larger repository collects it, where pytest forbids
``pytest_plugins``; ``load_profile`` from ``pytest_configure`` works in both places (pytest
calls it for a conftest registered late too), before the test module builds its suite.
"""
from typing import Any

from flowjob_core.testing import load_profile


def pytest_configure(config: Any) -> None:
    load_profile()
