"""Fixtures: a session with core, flowjob-optim's plugin and the toy plugin only (no entry points)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any, Callable

import pytest

import flowjob_optim.plugin
from flowjob_core import FunctionConfig, JobFunction, Session, make_plugin_manager

_HERE = pathlib.Path(__file__).parent


def _load_toy() -> Any:
    # tests run with --import-mode=importlib: load the sibling module by path, once
    name = "flowjob_optim_toy_plugin"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE / "toy_plugin.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def toy() -> Any:
    return _load_toy()


@pytest.fixture
def session(toy: Any) -> Any:
    s = Session(make_plugin_manager(plugins=[toy, flowjob_optim.plugin], autoload=False))
    yield s
    s.close()


@pytest.fixture
def define(session: Session) -> Callable[..., JobFunction]:
    """``define(func, type="train", config=None)``: a global function of the test session."""

    def make(func: Callable[..., Any], type: str = "train", config: FunctionConfig | None = None) -> JobFunction:  # noqa: A002
        return JobFunction(func, type, config, session)

    return make
