"""The collectives of split variables (``flowjob_core.runtime.variable_shards``): pieces gathered onto rank 0 alone,
and sent from rank 0 to each rank, also through a world plugin that offers only ``allgather``."""
import numpy as np

from flowjob_core.runtime import variable_shards

F32 = np.dtype(np.float32)


class TwoRanks:
    """Rank ``rank`` of two, the other rank's value being ``other``."""

    size, machines, machine_id = 2, 1, 0

    def __init__(self, rank, other):
        self.rank, self.other, self.calls = rank, other, []

    def gather_to_root(self, value):
        self.calls.append("gather_to_root")
        return [value, self.other] if self.rank == 0 else None

    def scatter_from_root(self, values):
        self.calls.append("scatter_from_root")
        return (values if self.rank == 0 else self.other)[self.rank]


class TwoRanksWithoutGather(TwoRanks):
    def allgather(self, value):
        self.calls.append("allgather")
        return [value, self.other] if self.rank == 0 else [self.other, value]

    gather_to_root = property(lambda self: None)  # a world plugin that does not offer them
    scatter_from_root = property(lambda self: None)


def test_rank_0_alone_holds_the_gathered_pieces():
    mine, other = np.ones((2, 3), F32), np.full((2, 3), 2.0, F32)
    root, second = TwoRanks(0, other), TwoRanks(1, other)
    gathered = variable_shards.gather_to_root(root, mine)
    assert [p.tolist() for p in gathered] == [mine.tolist(), other.tolist()]
    assert variable_shards.gather_to_root(second, mine) is None
    assert root.calls == second.calls == ["gather_to_root"]


def test_a_world_without_gather_to_root_is_asked_for_an_all_gather():
    world = TwoRanksWithoutGather(1, np.zeros(2, F32))
    assert variable_shards.gather_to_root(world, np.ones(2, F32)) is None
    assert world.calls == ["allgather"]


def test_each_rank_gets_its_piece_from_rank_0():
    pieces = ["rows of rank 0", "rows of rank 1"]
    assert variable_shards.scatter_from_root(TwoRanks(0, None), pieces) == "rows of rank 0"
    assert variable_shards.scatter_from_root(TwoRanks(1, pieces), None) == "rows of rank 1"
    plain = TwoRanksWithoutGather(1, pieces)  # rank 0's list reaches rank 1 by the all-gather
    assert variable_shards.scatter_from_root(plain, None) == "rows of rank 1"
    assert plain.calls == ["allgather"]
