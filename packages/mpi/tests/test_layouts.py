"""The consistent view with declared layouts: a model whose embedding table is split by rows and whose hidden layer
is split by columns trains on 2 ranks with one process's losses, each rank holding half of each split variable;
its checkpoints keep the whole variables and load across rank counts."""
import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks
SPLIT = {"embedding": 0, "hidden-weight": 1, "hidden-bias": 0}
WHOLE = {"embedding": (64, 4), "hidden-weight": (12, 8), "hidden-bias": (8,), "out-weight": (8, 1)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(one process's folder, 2 ranks' folder): 3 steps of SGD with momentum each, saved to <folder>/model."""
    folders = []
    for n in (0, 2):
        out = tmp_path_factory.mktemp(f"ranks{n}")
        ok(ranks(n, "model_parallel.py", 3, out, "momentum", "-", out / "model", timeout=120))
        folders.append(out)
    return folders


def test_two_ranks_train_like_one_process_holding_half_of_each_split_variable(trained):
    one, two = trained
    want, got = dict(np.load(one / "result.npz")), dict(np.load(two / "result.npz"))
    assert sorted(got) == sorted(want)
    for name in want:  # the losses, and the whole variables and momenta gathered by the save
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    for r in range(2):
        held = dict(np.load(two / f"rank{r}.npz"))
        for name, shape in WHOLE.items():
            half = list(shape)
            if name in SPLIT:
                half[SPLIT[name]] //= 2
            assert list(held[name]) == half, (name, r)
            assert list(held[f"{name}-momentum"]) == half, (name, r)  # the optimizer's slot is split alike
    alone = dict(np.load(one / "rank0.npz"))
    assert {name: list(alone[name]) for name in WHOLE} == {name: list(shape) for name, shape in WHOLE.items()}


def test_the_dump_shows_layouts_and_boxing_nodes(trained):
    text = (trained[1] / "dump.txt").read_text()
    assert "variable embedding: (32, 4):float32 S(0)" in text
    assert "variable hidden-weight: (12, 4):float32 S(1)" in text
    assert "variable out-weight: (8, 1):float32 B" in text
    assert "variable embedding-momentum: (32, 4):float32 S(0)" in text
    assert "P = sharded_gather(embedding/out, Input_0/out) {axis=0, shard_size=64, shard_start=0, shard_stop=32}" \
        in text
    assert "(32, 4):float32 S(0) = sharded_gather_grad(" in text  # the table's gradient is only its rows
    assert "= mpi_allreduce(" in text and "= mpi_allgather(" in text and "= mpi_split(" in text
    # the hidden layer's weight gradient: partial sums, each rank keeping the sum of its columns
    assert "(12, 4):float32 S(1) = mpi_reduce_scatter(Matmul_4_grad_1/out_0) {axis=1, ranks=2}" in text, text
    assert "mpi_allreduce_start" not in text  # no data-parallel gradient all-reduce


def test_four_ranks_train_like_one_process(trained, tmp_path):
    ok(ranks(4, "model_parallel.py", 3, tmp_path, "momentum", timeout=120))
    want, got = dict(np.load(trained[0] / "result.npz")), dict(np.load(tmp_path / "result.npz"))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    assert list(np.load(tmp_path / "rank3.npz")["embedding"]) == [16, 4]


def test_a_checkpoint_saved_on_two_ranks_loads_in_one_process_and_on_four(trained, tmp_path):
    one, two = trained
    from_two, on_four = tmp_path / "from_two", tmp_path / "on_four"
    from_two.mkdir()
    on_four.mkdir()
    ok(ranks(0, "model_parallel.py", 2, from_two, "momentum", two / "model", timeout=120))
    ok(ranks(4, "model_parallel.py", 2, on_four, "momentum", two / "model", timeout=120))
    want, got = dict(np.load(from_two / "result.npz")), dict(np.load(on_four / "result.npz"))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)


def test_a_checkpoint_saved_on_two_ranks_loads_in_one_process_and_back(trained, tmp_path):
    one, two = trained
    for name, shape in WHOLE.items():  # legacy's layout: the whole variable in <name>/out
        stored = np.fromfile(two / "model" / name / "out", dtype=np.float32)
        assert stored.size == int(np.prod(shape)), name
    from_two, from_one = tmp_path / "from_two", tmp_path / "from_one"
    from_two.mkdir()
    from_one.mkdir()
    ok(ranks(0, "model_parallel.py", 2, from_two, "momentum", two / "model", timeout=120))
    ok(ranks(2, "model_parallel.py", 2, from_one, "momentum", one / "model", from_one / "model", timeout=120))
    want, got = dict(np.load(from_two / "result.npz")), dict(np.load(from_one / "result.npz"))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    first = dict(np.load(one / "result.npz"))["losses"]
    assert not np.allclose(want["losses"], first[:2])  # training went on from the checkpoint, not from the start


def test_an_uneven_split_variable_is_an_error_naming_job_and_variable(tmp_path):
    result = ranks(2, "layout_cases.py", "uneven", timeout=60)
    assert result.returncode != 0
    assert "VariableError" in result.stderr
    assert "job 'uneven_job', variable 'table' (S(0))" in result.stderr and "does not split evenly" in result.stderr


def test_ranks_declaring_different_layouts_stop_together(tmp_path):
    result = ranks(2, "layout_cases.py", "disagree", timeout=60)
    assert result.returncode != 0
    assert ("MpiError: global function 'disagree_job', variable 'table': the ranks declare it with different "
            "layouts (rank 0: S(0), rank 1: B)") in result.stderr, result.stderr


def test_a_blob_annotated_split_is_boxed_for_its_readers(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "layout_cases.py", "hint", one, timeout=60))
    ok(ranks(2, "layout_cases.py", "hint", two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=1e-6)
    text = (two / "dump.txt").read_text()
    # the partial sums of the gather are reduce-scattered: each rank sums its 2 rows and squares only those
    assert "(4, 2, 3):float32 P = sharded_gather(" in text, text
    assert "(2, 2, 3):float32 S(0) = mpi_reduce_scatter(Gather_" in text and "{axis=0, ranks=2}" in text, text
    assert "(2, 2, 3):float32 S(0) = square(" in text, text


def test_a_job_with_layouts_reads_its_rows_of_the_batch_where_the_ops_allow(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "layout_cases.py", "rows", one, timeout=60))
    ok(ranks(2, "layout_cases.py", "rows", two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=1e-6)
    text = (two / "dump.txt").read_text()
    # the placeholder's rows [0, 4) on rank 0 (a view), the product and relu on them, the result gathered
    assert "(4, 6):float32 S(0) = mpi_split(Input_0/out) {axis=0, count=4, start=0}" in text, text
    assert "(4, 4):float32 S(0) = matmul(" in text and "(4, 4):float32 S(0) = relu(" in text, text
    assert "(4,):float32 S(0), SparseSoftmaxCrossEntropy_" in text, text  # the loss of the rank's rows
    assert "(8,):float32 B = mpi_allgather(" in text, text  # the returned per-row loss
    # the weight's gradient: partial products over the rows, summed as data parallelism does (here a
    # reduce-scatter, the 1/N scale on each rank's half, then an all-gather: the bytes of one all-reduce)
    assert "(6, 4):float32 P = matmul(" in text and "(3, 4):float32 S(0) = mpi_reduce_scatter(Matmul_" in text, text
    assert "(6, 4):float32 B = mpi_allgather(weight_grad_scaled" in text, text


def test_a_job_with_layouts_refuses_a_reader_of_each_rank_s_records(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ok(ranks(0, "reader.py", "write", data, tmp_path))
    run = ranks(2, "reader.py", "laid_out", data, tmp_path)
    assert run.returncode != 0
    assert "global function 'train_job': it declares layouts and reads ['reader/out_0']" in run.stderr, run.stderr


def test_gradient_clipping_over_a_split_variable_is_refused_naming_the_op(tmp_path):
    run = ranks(2, "layout_cases.py", "clip", timeout=60)
    assert run.returncode != 0
    assert ("global function 'clip_job', op 'System-Train-ClipByGlobalNorm' (optim_clip_by_global_norm): clipping "
            "by the global norm over the gradients of split variables ['table'] is not built yet") in run.stderr, \
        run.stderr


def test_a_classifier_split_by_classes_trains_like_one_process(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "layout_cases.py", "classes", one, timeout=60))
    ok(ranks(2, "layout_cases.py", "classes", two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=2e-5, atol=2e-6)
    text = (two / "dump.txt").read_text()
    assert "(8, 4):float32 S(1) = matmul(Input_0/out, class-weight/out)" in text, text  # this rank's classes
    assert "(8,):float32 B, SparseSoftmaxCrossEntropy_" in text and "(8, 4):float32 S(1) = " \
        "mpi_sparse_softmax_cross_entropy_class_split(" in text, text
    assert "(8, 4):float32 S(1) = sharded_sparse_softmax_cross_entropy_grad(" in text, text


def test_a_checkpoint_manager_saves_a_split_variable_whole(tmp_path):
    ok(ranks(2, "layout_cases.py", "manager", tmp_path, timeout=60))
    stored = np.fromfile(tmp_path / "saved" / "snapshot_1" / "table" / "out", dtype=np.float32).reshape(8, 3)
    assert stored.tobytes() == np.load(tmp_path / "value.npy").tobytes()


def test_partial_fc_sampling_for_other_shards_than_the_ranks_is_an_error_naming_job_op_and_blobs(tmp_path):
    result = ranks(2, "layout_cases.py", "shards", timeout=60)
    assert result.returncode != 0
    assert ("MpiError: global function 'shards_job', op 'DistributedPartialFcSample_1' (distributed_partial_fc_sample)"
            in result.stderr), result.stderr
    assert "on this rank's pieces of its inputs ('fc7-weight/out' (4, 3), 'Input_0" in result.stderr, result.stderr
    assert ("sharded_distributed_partial_fc_sample: the piece [0, 4) of 8 rows is not one of its parallel_num 4 "
            "shards") in result.stderr, result.stderr


def test_a_blob_annotated_split_along_an_axis_it_lacks_is_an_error_naming_job_op_and_blob(tmp_path):
    result = ranks(2, "layout_cases.py", "axis", timeout=60)
    assert result.returncode != 0
    assert ("ValueError: job 'axis_job', op 'Input_0', blob 'Input_0/out': with_distribute: split axis 2 is out of "
            "range for a blob of shape (4, 2)") in result.stderr, result.stderr


def test_with_gradient_distribute_gives_the_gradient_its_layout_and_trains_like_one_process(tmp_path):
    one, two, plain = tmp_path / "one", tmp_path / "two", tmp_path / "plain"
    for folder in (one, two, plain):
        folder.mkdir()
    ok(ranks(0, "layout_cases.py", "gradient", one, timeout=60))
    ok(ranks(2, "layout_cases.py", "gradient", two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=2e-5, atol=2e-6)
    text = (two / "dump.txt").read_text()
    # y = x @ w is split by columns (w's); its gradient is given rows, from which w's gradient, split by columns,
    # takes its columns back by an all-to-all (fewer bytes than a reduce-scatter of partial products)
    assert "Matmul_1/out_0: (8, 2):float32 S(1) = matmul(" in text, text
    assert "Sigmoid_2_grad/out_0: (4, 4):float32 S(0) = sigmoid_grad(" in text, text
    assert ("(8, 2):float32 S(1) = mpi_all_to_all(Sigmoid_2_grad/out_0) {concat_axis=0, ranks=2, "
            "split_axis=1}") in text, text
    ok(ranks(2, "layout_cases.py", "gradient_plain", plain, timeout=60))  # without it: w's columns throughout
    text = (plain / "dump.txt").read_text()
    assert "Sigmoid_2_grad/out_0: (8, 2):float32 S(1) = sigmoid_grad(" in text and "mpi_all_to_all" not in text, text


def test_a_split_moved_to_another_axis_is_one_all_to_all_and_trains_like_one_process(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "layout_cases.py", "alltoall", one, timeout=60))
    ok(ranks(2, "layout_cases.py", "alltoall", two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=2e-5, atol=2e-6)
    text = (two / "dump.txt").read_text()
    # the rows this rank holds, cut in two by columns: one half stays, the other goes to the other rank
    assert ("Square_1-boxing/out_0: (8, 3):float32 S(1) = mpi_all_to_all(Square_1/out_0) {concat_axis=0, ranks=2, "
            "split_axis=1}") in text, text
    assert "mpi_allgather(Square_1" not in text, text


def test_the_gradient_of_an_all_to_all_is_the_all_to_all_back():
    from flowjob_mpi.ops import MPI_ALL_TO_ALL

    class Grad:
        attrs, dy = {"split_axis": 1, "concat_axis": 0, "ranks": 2}, "dy"

        def apply(self, op, inputs, attrs):
            return op, inputs, attrs

    assert MPI_ALL_TO_ALL.grad(Grad()) == [("mpi_all_to_all", ["dy"], {"split_axis": 0, "concat_axis": 1, "ranks": 2})]
    from flowjob_core import BlobSpec
    (piece,) = MPI_ALL_TO_ALL.infer([BlobSpec((4, 6), np.dtype(np.float32))], Grad.attrs)
    assert piece.shape == (8, 3)


@pytest.mark.parametrize("case", ["uneven_blob", "uneven_gradient"])
def test_a_declared_split_that_does_not_divide_evenly_is_an_error_naming_job_op_and_blob(case, tmp_path):
    result = ranks(2, "layout_cases.py", case, timeout=60)
    assert result.returncode != 0
    if case == "uneven_blob":
        assert "MpiError: global function 'uneven_blob_job', op 'Matmul_1' (matmul) at " in result.stderr, \
            result.stderr
        assert "output 'Matmul_1/out_0': axis 0 of shape (5, 4) (5) does not split evenly over 2 ranks" \
            in result.stderr, result.stderr
    else:  # the gradient's producer, and the blob whose gradient it is
        assert ("output 'Sigmoid_2_grad/out_0': the gradient of blob 'Matmul_1/out_0' "
                "(with_gradient_distribute(S(0))): axis 0 of shape (5, 4) (5) does not split evenly over 2 ranks"
                ) in result.stderr, result.stderr


def test_a_gradient_split_along_an_axis_the_blob_lacks_is_an_error_naming_job_op_and_blob(tmp_path):
    result = ranks(2, "layout_cases.py", "gradient_axis", timeout=60)
    assert result.returncode != 0
    assert ("ValueError: job 'gradient_axis_job', op 'Matmul_1', blob 'Matmul_1/out_0': with_gradient_distribute: "
            "split axis 2 is out of range for a blob of shape (4, 2)") in result.stderr, result.stderr


def test_python_m_oneflow_dump_shows_the_gradient_s_layout_on_two_ranks():
    import subprocess
    import sys

    from flowjob_mpi.launch import find_mpiexec

    script = sibling(__file__, "mpirun").WORKERS / "gradient_dump.py"
    traced = subprocess.run([sys.executable, "-m", "oneflow", "dump", str(script)], capture_output=True, text=True,
                            timeout=60)
    assert "gradient layouts:\n  Matmul_1/out_0: S(0)" in traced.stdout, traced.stdout + traced.stderr
    planned = subprocess.run([find_mpiexec(), "-n", "2", sys.executable, "-m", "oneflow", "dump", "--after", "all",
                              str(script)], capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert "Sigmoid_2_grad/out_0: (4, 4):float32 S(0) = sigmoid_grad(" in planned.stdout, planned.stdout
    assert "(8, 2):float32 S(1) = mpi_all_to_all(Sigmoid_2_grad/out_0)" in planned.stdout, planned.stdout
