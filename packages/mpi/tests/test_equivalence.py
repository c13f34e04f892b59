"""Training on N ranks gives the one-process losses and variables (float32 summation order aside),
and every rank ends with bitwise the same variables."""
import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


reference = sibling(__file__, "mpirun").reference  # one process's results, the fixture the tests compare with


@pytest.mark.parametrize("n, optimizer, batch, loss", [
    (2, "sgd", 10, "rows"),   # SGD with momentum, per-row losses gathered
    (3, "adam", 10, "rows"),  # uneven split: 4, 3, 3 rows
    (3, "sgd", 11, "mean"),   # a scalar loss averaged over the batch: weights 4/11, 4/11, 3/11
    (2, "adam", 8, "mean"),
])
def test_ranks_match_one_process(tmp_path, reference, n, optimizer, batch, loss):
    steps = 4
    ok(ranks(n, "train.py", optimizer, batch, steps, tmp_path, loss))
    want = reference(optimizer, batch, steps, loss)
    got = dict(np.load(tmp_path / "result.npz"))
    assert sorted(got) == sorted(want)
    assert got["losses"].shape == want["losses"].shape  # the global values, on rank 0
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    per_rank = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(n)]
    for r, values in enumerate(per_rank[1:], 1):
        for name, value in values.items():
            assert value.tobytes() == per_rank[0][name].tobytes(), f"{name} differs on rank {r}"


def test_small_buckets_start_during_the_backward_pass(tmp_path, reference):
    # 100-byte buckets: one per gradient; each starts right after its gradient, the waits come last
    ok(ranks(2, "train.py", "sgd", 10, 3, tmp_path, "rows", 100))
    want, got = reference("sgd", 10, 3, "rows"), dict(np.load(tmp_path / "result.npz"))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    order = (tmp_path / "order.txt").read_text().split()
    starts = [i for i, op in enumerate(order) if op == "mpi_allreduce_start"]
    waits = [i for i, op in enumerate(order) if op == "mpi_allreduce_wait"]
    assert len(starts) == len(waits) == 4  # hidden and out, weight and bias
    assert starts[0] < waits[0] and max(starts) < min(waits)
    between = order[starts[0] + 1:max(starts)]
    assert any(op not in ("mpi_allreduce_start", "scalar_mul") for op in between), order  # backward ops overlap


def test_watch_and_watch_diff_see_global_values(tmp_path):
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir()
    three.mkdir()
    ok(ranks(0, "watch.py", one))
    ok(ranks(3, "watch.py", three))  # 5 rows: 2, 2, 1
    want, got = dict(np.load(one / "watched.npz")), dict(np.load(three / "watched.npz"))
    assert want["hidden"].shape == (2, 5, 4) and want["weight_diff"].shape == (2, 4, 3)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)


def test_mirrored_ranks_feeding_their_shards_train_as_one_process_on_the_whole_batch(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "mirrored.py", "consistent", 4, 3, one, 2))
    ok(ranks(2, "mirrored.py", "mirrored", 4, 3, two, 2))  # each rank its 4 rows, tp.ListNumpy
    want, got = dict(np.load(one / "result.npz")), dict(np.load(two / "result.npz"))
    assert sorted(got) == sorted(want)
    for name in want:  # losses, the ListListNumpy echo and the watched blob: every rank's pieces, gathered
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    other = dict(np.load(two / "rank1.npz"))  # rank 1 got the same gathered results and holds the same variables
    assert sorted(other) == sorted(got)
    assert all(other[name].tobytes() == got[name].tobytes() for name in other)
