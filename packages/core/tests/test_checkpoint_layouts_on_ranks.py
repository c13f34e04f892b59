"""Before a checkpoint touches a file on several ranks, one all-gather checks the ranks agree on every split variable
(``flowjob_core.checkpoint.ranks.check_layouts``): a variable one rank splits and another holds whole, or pieces of
another shape or that leave rows out, is a ``CheckpointError`` naming the variable and what each rank holds."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, Session
from flowjob_core.checkpoint.ranks import check_layouts
from flowjob_core.errors import CheckpointError
from flowjob_core.ir.layout import Shard, split

F32 = np.dtype(np.float32)


def _zeros(shape, dtype, rng):
    return np.zeros(shape, dtype)


def _rank(shards):
    """A session holding ``table`` as each of ``shards`` says (None: held whole)."""
    session = Session()
    if shards is None:
        session.variables.declare("table", BlobSpec((8, 3), F32), _zeros)
    else:
        session.variables.declare("table", BlobSpec((8, 3), F32), _zeros, layout=split(shards.axis), shard=shards)
    session.variables.declare("bias", BlobSpec((3,), F32), _zeros)
    return session


class Ranks:
    """This rank's view of a world whose ranks hold the sessions ``sessions``: the all-gather answers what each
    rank would send."""

    def __init__(self, sessions, rank=0):
        self.sessions, self.rank, self.size = sessions, rank, len(sessions)

    def allgather(self, mine):
        return [mine if r == self.rank else self._held(s) for r, s in enumerate(self.sessions)]

    @staticmethod
    def _held(session):
        store = session.variables
        return {n: (tuple(store[n].spec.shape), str(store[n].spec.dtype), store[n].shard.axis, store[n].shard.start,
                    store[n].shard.stop) for n in store.names() if store[n].shard is not None}


def test_ranks_holding_the_rows_of_a_split_variable_agree():
    sessions = [_rank(Shard(0, 0, 4)), _rank(Shard(0, 4, 8))]
    for r in range(2):
        assert check_layouts(sessions[r], Ranks(sessions, r)) == {"table": [Shard(0, 0, 4), Shard(0, 4, 8)]}


@pytest.mark.parametrize("second,said", [
    (None, "rank 0: S(0) rows [0, 4) of (8, 3) float32; rank 1: not split (held whole, or no such variable)"),
    (Shard(0, 2, 6), "rank 0: S(0) rows [0, 4) of (8, 3) float32; rank 1: S(0) rows [2, 6) of (8, 3) float32"),
    (Shard(1, 0, 1), "rank 0: S(0) rows [0, 4) of (8, 3) float32; rank 1: S(1) rows [0, 1) of (8, 3) float32"),
])
def test_ranks_disagreeing_on_a_split_variable_name_it_and_each_rank(second, said):
    sessions = [_rank(Shard(0, 0, 4)), _rank(second)]
    for r in range(2):  # the same error on every rank, from the same all-gathered answers
        with pytest.raises(CheckpointError) as caught:
            check_layouts(sessions[r], Ranks(sessions, r))
        assert str(caught.value) == (f"variable 'table': the ranks hold it with different layouts ({said}); every "
                                     f"rank must declare it with the same distribute, and hold its own rows")
