"""``flow.unittest.env``: what the machine running a legacy test suite offers.

Legacy test runs were told their size by environment variables; those that mean something to a
one-process build are read here. ``ONEFLOW_TEST_DEVICE_NUM`` still says how many devices the run
has; without it, the default session's ``flow.config.cpu_device_num``/``gpu_device_num`` decide.
The machines and processes of the run are the session's world (``flowjob_core.runtime.world``: flowjob-mpi's
ranks under ``mpiexec``, else this one process): ``node_size()`` is its machine count whatever
``ONEFLOW_TEST_NODE_LIST`` says (the node list is still reported, for suites that print or check it), and
``world_size()`` its process count unless ``ONEFLOW_TEST_WORLD_SIZE`` says otherwise, as legacy read it.
"""
from __future__ import annotations

import os

from flowjob_core.api import flow_config as settings
from flowjob_core.errors import ConfigError
from flowjob_core.runtime.session import get_default_session
from flowjob_core.runtime.world import World, world_of

__all__ = ["device_num", "eager_execution_enabled", "has_node_list", "has_world_size", "node_list", "node_size",
           "typing_check_enabled", "world_size"]

DEVICE_NUM_VAR = "ONEFLOW_TEST_DEVICE_NUM"
NODE_LIST_VAR = "ONEFLOW_TEST_NODE_LIST"
EAGER_VAR = "ONEFLOW_TEST_ENABLE_EAGER"
WORLD_SIZE_VAR = "ONEFLOW_TEST_WORLD_SIZE"
TYPING_CHECK_VAR = "ONEFLOW_TEST_ENABLE_TYPING_CHECK"


def eager_execution_enabled() -> bool:
    """Whether the test run asks for eager mode (``ONEFLOW_TEST_ENABLE_EAGER=1``), as legacy read it.
    ``flow.unittest.TestCase`` refuses such a run: this build is lazy only."""
    return os.getenv(EAGER_VAR) == "1"


def typing_check_enabled() -> bool:
    """Whether the test run asks for legacy's typing checks (``ONEFLOW_TEST_ENABLE_TYPING_CHECK=1``). Legacy's
    suites then also ran their jobs with ``oneflow.typing`` annotations; here annotated parameters and returns
    are always checked, so a suite may take either branch."""
    return os.getenv(TYPING_CHECK_VAR) == "1"


def has_node_list() -> bool:
    return bool(os.getenv(NODE_LIST_VAR))


def node_list() -> list[str]:
    """The hosts named by ``ONEFLOW_TEST_NODE_LIST`` (comma separated)."""
    listed = os.getenv(NODE_LIST_VAR)
    if not listed:
        raise ConfigError(f"flow.unittest.env.node_list: {NODE_LIST_VAR} is not set")
    return listed.split(",")


def _world() -> World:
    return world_of(get_default_session())


def node_size() -> int:
    """Machines this test run has: the world's (one without ``mpiexec``; see ``python -m oneflow launch``)."""
    return _world().machines


def has_world_size() -> bool:
    """Whether the run's process count is known beyond this one process: ``ONEFLOW_TEST_WORLD_SIZE`` is set
    (it must be a number), or the program runs on several ranks."""
    return _world_size_var() is not None or _world().size > 1


def world_size() -> int:
    """Processes of this test run: ``ONEFLOW_TEST_WORLD_SIZE`` when set, else the world's ranks (1 alone)."""
    told = _world_size_var()
    return told if told is not None else _world().size


def _world_size_var() -> int | None:
    raw = os.getenv(WORLD_SIZE_VAR)
    if not raw:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ConfigError(f"flow.unittest.env: {WORLD_SIZE_VAR} must be a positive integer, got {raw!r}")
    return int(raw)


def device_num() -> int:
    """Devices per machine this test run has: ``ONEFLOW_TEST_DEVICE_NUM`` when set, else the
    default session's device count (``flow.config.cpu_device_num``/``gpu_device_num``, default 1)."""
    raw = os.getenv(DEVICE_NUM_VAR)
    if raw is None or raw.strip() == "":
        return settings.device_num()
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"flow.unittest.env.device_num: {DEVICE_NUM_VAR} must be a positive integer, got {raw!r}")
    return count
