"""Helpers shared by the tests of the legacy op surface (loaded with ``sibling(__file__, "legacy_helpers")``)."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import get_default_session, hookimpl
from flowjob_core.world import OneProcess


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


class RankOf(OneProcess):
    """A ``flowjob_world`` plugin answering rank ``rank`` of ``size``, as flowjob-mpi answers on an MPI rank."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    @hookimpl
    def flowjob_world(self) -> "RankOf":
        return self


def as_rank(rank: int, size: int) -> None:
    """Make the default session's world rank ``rank`` of ``size``: readers traced from now on read that shard."""
    get_default_session().pm.register(RankOf(rank, size))
