"""Legacy's model-parallel programs on 2 ranks, started by ``mpiexec`` and by ``python -m oneflow launch``: the
documentation's hybrid-parallel MLP and the Wide&Deep-style model train with one process's losses, each rank
holding half of each split variable."""
import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


def _trained(tmp_path, worker, launcher, *args):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, worker, *args[:1], one, *args[1:], timeout=60))
    ok(ranks(2, worker, *args[:1], two, *args[1:], timeout=120, launcher=launcher))
    return one, two


def _assert_like_one_process(one, two, split):
    want, got = dict(np.load(one / "result.npz")), dict(np.load(two / "result.npz"))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    for r in range(2):
        held = dict(np.load(two / f"rank{r}.npz"))
        for name, axis in split.items():
            half = list(want[name].shape)
            half[axis] //= 2
            assert list(held[name]) == half, (name, r)


@pytest.mark.parametrize("launcher", ["mpiexec", "launch"])
def test_the_documentation_s_hybrid_parallel_mlp_trains_like_one_process(tmp_path, launcher):
    one, two = _trained(tmp_path, "hybrid_parallel_mlp.py", launcher, 3)
    # the output layer split by units (model_distribute=split(0)), the hidden layer whole on each rank
    _assert_like_one_process(one, two, {"dense2-weight": 0, "dense2-bias": 0})
    held = dict(np.load(two / "rank0.npz"))
    assert list(held["dense1-weight"]) == [16, 16]


def test_the_wide_and_deep_model_trains_like_one_process_under_oneflow_launch(tmp_path):
    one, two = _trained(tmp_path, "model_parallel.py", "launch", 3, "momentum")
    _assert_like_one_process(one, two, {"embedding": 0, "hidden-weight": 1, "hidden-bias": 0})


@pytest.mark.parametrize("launcher", ["mpiexec", "launch"])
def test_a_face_head_with_its_class_layer_split_by_partial_fc_trains_like_one_process(tmp_path, launcher):
    # every class sampled (oneflow_face's sample_ratio 1.0): which negatives a smaller sample draws is random
    one, two = _trained(tmp_path, "face_head.py", launcher, 3, 16)
    _assert_like_one_process(one, two, {"fc7-weight": 0, "fc7-weight-momentum": 0})
    text = (two / "dump.txt").read_text()
    # each rank samples its own classes and its gradient lands in its own rows: no whole class layer anywhere
    assert ("sampled_weight: (8, 4):float32 S(0) on 0:0-1 (ranks 0-1) = sharded_distributed_partial_fc_sample("
            "fc7-weight/out") in text, text
    assert "(8, 4):float32 S(0) on 0:0-1 (ranks 0-1) = sharded_distributed_partial_fc_sample_grad(" in text, text
    assert "mpi_sparse_softmax_cross_entropy_class_split(" in text, text
    assert "(16, 4)" not in text, text
