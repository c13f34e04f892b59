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
