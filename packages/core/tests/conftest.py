from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

from flowjob_core import Session, make_plugin_manager

_HERE = pathlib.Path(__file__).parent


def _load_toy():
    # tests run with --import-mode=importlib: load the sibling module by path, once
    name = "flowjob_core_toy_plugin"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE / "toy_plugin.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def toy():
    return _load_toy()


@pytest.fixture
def session(toy):
    """A fresh session with core's built-ins and the toy plugin only (no entry points)."""
    s = Session(make_plugin_manager(plugins=[toy], autoload=False))
    yield s
    s.close()
