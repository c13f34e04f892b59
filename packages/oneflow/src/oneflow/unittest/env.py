"""``flow.unittest.env``: what the machine running a legacy test suite offers.

Legacy test runs were told their size by environment variables; those that mean something to a
one-process build are read here. ``ONEFLOW_TEST_DEVICE_NUM`` still says how many devices the run
has; without it, the default session's ``flow.config.cpu_device_num``/``gpu_device_num`` decide.
This build runs on one machine, so ``node_size()`` is 1 whatever ``ONEFLOW_TEST_NODE_LIST`` says
(the node list is still reported, for suites that print or check it).
"""
from __future__ import annotations

import os

from flowjob_core import settings
from flowjob_core.errors import ConfigError

__all__ = ["device_num", "eager_execution_enabled", "has_node_list", "node_list", "node_size"]

DEVICE_NUM_VAR = "ONEFLOW_TEST_DEVICE_NUM"
NODE_LIST_VAR = "ONEFLOW_TEST_NODE_LIST"
EAGER_VAR = "ONEFLOW_TEST_ENABLE_EAGER"


def eager_execution_enabled() -> bool:
    """Whether the test run asks for eager mode (``ONEFLOW_TEST_ENABLE_EAGER=1``), as legacy read it.
    ``flow.unittest.TestCase`` refuses such a run: this build is lazy only."""
    return os.getenv(EAGER_VAR) == "1"


def has_node_list() -> bool:
    return bool(os.getenv(NODE_LIST_VAR))


def node_list() -> list[str]:
    """The hosts named by ``ONEFLOW_TEST_NODE_LIST`` (comma separated)."""
    listed = os.getenv(NODE_LIST_VAR)
    if not listed:
        raise ConfigError(f"flow.unittest.env.node_list: {NODE_LIST_VAR} is not set")
    return listed.split(",")


def node_size() -> int:
    """Machines this test run has: one (multi-machine runs are not part of this build)."""
    return 1


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
