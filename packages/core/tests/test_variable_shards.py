"""Saving split variables (``flowjob_core.runtime.variable_shards``): the whole is gathered onto rank 0, the rank
that writes the checkpoint, and on no other rank."""
import numpy as np

from flowjob_core import BlobSpec, Session
from flowjob_core.ir.layout import Shard, split
from flowjob_core.runtime import variable_shards

F32 = np.dtype(np.float32)


class TwoRanks:
    """Rank ``rank`` of two, the other rank's piece of every variable being ``other``."""

    size, machines, machine_id = 2, 1, 0

    def __init__(self, rank, other):
        self.rank, self.other, self.calls = rank, other, []

    def gather_to_root(self, value):
        self.calls.append("gather_to_root")
        return [value, self.other] if self.rank == 0 else None


class TwoRanksWithoutGather(TwoRanks):
    def allgather(self, value):
        self.calls.append("allgather")
        return [value, self.other]

    gather_to_root = property(lambda self: None)  # a world plugin that does not offer it


def _session_with_rows_0_and_1():
    session = Session()
    session.variables.declare("table", BlobSpec((4, 3), F32), lambda shape, dtype, rng: np.ones(shape, dtype),
                              layout=split(0), shard=Shard(0, 0, 2))
    session.variables.declare("whole", BlobSpec((2,), F32))
    return session


def test_rank_0_alone_holds_the_gathered_whole():
    other = np.full((2, 3), 2.0, F32)
    root, second = TwoRanks(0, other), TwoRanks(1, other)
    wholes = variable_shards.gather_whole(_session_with_rows_0_and_1(), root)
    np.testing.assert_array_equal(wholes["table"], np.concatenate([np.ones((2, 3)), other]))
    assert variable_shards.gather_whole(_session_with_rows_0_and_1(), second) == {}
    assert root.calls == second.calls == ["gather_to_root"]


def test_a_world_without_gather_to_root_is_asked_for_an_all_gather():
    other = np.full((2, 3), 2.0, F32)
    world = TwoRanksWithoutGather(1, other)
    assert variable_shards.gather_whole(_session_with_rows_0_and_1(), world) == {}
    assert world.calls == ["allgather"]
