"""The step check's comparison of fed arrays, on a stand-in communicator: what a fingerprint tells apart,
and how an argument fed differently is named with the ranks that fed what."""
import numpy as np
import pytest

from flowjob_mpi.agreement import RankMismatchError, StepAgreement, fingerprint


class Gathered:
    """A communicator whose all-gather answers what every rank would send, given the others' arrays."""

    def __init__(self, others: dict[int, list[np.ndarray]], rank: int, compare: str) -> None:
        self.others, self.rank, self.compare = others, rank, compare

    def allgather(self, mine):
        (job, step, layout), _ = mine
        summary = StepAgreement(None, 0, job, layout, compare=self.compare).summary
        return [mine if r == self.rank else ((job, step, layout), tuple(summary(a) for a in self.others[r]))
                for r in range(len(self.others) + 1)]


def test_a_fingerprint_tells_apart_a_changed_value_a_reordered_batch_a_dtype_and_a_shape():
    batch = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert fingerprint(batch) == fingerprint(batch.copy())
    changed = batch.copy()
    changed[3, 2] = np.nextafter(changed[3, 2], np.float32(100))
    assert fingerprint(changed) != fingerprint(batch)
    assert fingerprint(batch[::-1]) != fingerprint(batch)  # the same rows in another order: other rows per rank
    assert fingerprint(batch.astype(np.int32)) != fingerprint(batch)
    assert fingerprint(batch.reshape(3, 4)) != fingerprint(batch)
    assert fingerprint(np.asfortranarray(batch)) == fingerprint(batch)  # the values, not the memory layout
    assert fingerprint(np.zeros((0, 3), np.float32)).startswith("float32(0, 3):")


@pytest.mark.parametrize("compare", ["fingerprint", "digest"])
def test_an_argument_fed_differently_is_named_with_the_ranks_that_fed_what(compare):
    images = np.ones((4, 3), np.float32)
    labels = np.zeros((4, 1), np.float32)
    others = {1: [images, labels], 2: [images + 1, labels]}
    check = StepAgreement(Gathered(others, 0, compare), 0, "train", "layout", ("images", "labels"),
                          compare=compare)
    with pytest.raises(RankMismatchError) as caught:
        check.check(images, labels)
    text = str(caught.value)
    assert "global function 'train', argument 'images': the ranks fed different arrays at step 1" in text
    assert "rank(s) [2] fed other arrays than rank 0 (ranks 0, 1: " in text and "; rank 2: " in text
    assert "'labels'" not in text


def test_ranks_fed_alike_pass_every_step():
    images = np.ones((4, 3), np.float32)
    check = StepAgreement(Gathered({1: [images]}, 0, "fingerprint"), 0, "train", "layout", ("images",))
    for _ in range(3):
        check.check(images.copy())
    assert check.steps == 3


def test_every_collective_the_boxing_pass_makes_is_checked(monkeypatch):
    """A job whose only collective is an all-to-all (or a reduce-scatter, or a split op's piece) gets the step
    check too, with that node's shapes in its digest."""
    from types import SimpleNamespace

    from flowjob_core import BlobSpec
    from flowjob_core.ir.job import Job, Node
    from flowjob_mpi import agreement, plugin
    from flowjob_mpi.ops import MPI_ALL_TO_ALL, MPI_REDUCE_SCATTER

    two = SimpleNamespace(size=2)
    monkeypatch.setattr(agreement, "world", lambda: two)
    monkeypatch.setattr(plugin, "world", lambda: two)
    registered = []
    plugin.flowjob_add_ops(SimpleNamespace(add=registered.append))
    assert set(agreement.COLLECTIVES) <= {op.name for op in registered}  # each names a real op
    # every ordered op but the check itself, the wait of a bucket its start sent, and the sends and receives of a
    # placed job (which starts with the step check whatever it holds: flowjob_mpi.placements)
    assert {op.name for op in registered if op.effects.ordered} - {"mpi_step_check", "mpi_allreduce_wait",
                                                                   "mpi_send", "mpi_recv"} == set(agreement.COLLECTIVES)
    session = SimpleNamespace(config=SimpleNamespace(debug_mode=False))
    collectives = {MPI_ALL_TO_ALL.name, MPI_REDUCE_SCATTER.name}
    digests = set()
    for op in sorted(collectives):
        job = Job("only_" + op, specs={"x/out": BlobSpec((4, 2), np.dtype(np.float32))})
        job.nodes.append(Node(op, "box", ("x/out",), ("box/out_0",), {}))
        agreement.add_step_check(job, SimpleNamespace(session=session))
        assert [n.op for n in job.nodes] == ["mpi_step_check", op]
        digests.add(job.nodes[0].attrs["layout"])
    assert len(digests) == 2
