from __future__ import annotations

import pathlib

import pytest

from flowjob_core import Session, make_plugin_manager
from flowjob_core.testing.modules import sibling

_HERE = pathlib.Path(__file__).parent


@pytest.fixture
def toy():
    return sibling(__file__, "toy_plugin")


@pytest.fixture
def session(toy):
    """A fresh session with core's built-ins and the toy plugin only (no entry points)."""
    s = Session(make_plugin_manager(plugins=[toy], autoload=False))
    yield s
    s.close()
