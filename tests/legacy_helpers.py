"""Helpers shared by the tests of the legacy op surface (loaded with ``sibling(__file__, "legacy_helpers")``)."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import get_default_session


@pytest.fixture(autouse=True)
def fresh_session() -> Iterator[None]:
    """Each test starts and ends without a default session (jobs and variables of others gone)."""
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def value(name: str) -> np.ndarray:
    """A variable's value once every launched step has run."""
    flow.sync_default_session()
    return get_default_session().variables.get(name)


def sgd(loss: Any) -> None:
    """Plain SGD at learning rate 0.1 (no momentum), as a legacy program writes it."""
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
