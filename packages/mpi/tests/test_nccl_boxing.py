"""Boxing on GPU ranks through NCCL (flowjob_mpi.nccl_boxing): each collective on emulated device arrays through the
NCCL double (workers/fake_nccl.py, reducing with MPI) against numpy; the documentation's hybrid-parallel MLP on two
emulated GPU ranks with one process's losses, its boxing nodes recorded into the step's CUDA graph with no host
copy, against the MPI path's host round trips; a split moved to another axis as one NCCL group of sends and
receives (the all-to-all) with one process's results; then the hybrid MLP on real devices where CuPy, NCCL and two
devices exist."""
import json

import numpy as np
import pytest

from flowjob_core.testing.modules import sibling
from flowjob_mpi import nccl

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks

COLLECTIVES = {"allGather", "reduceScatter", "allReduce", "broadcast", "send", "recv"}


def _log(path):
    return [tuple(x) for x in json.loads(path.read_text())["log"]]


@pytest.mark.parametrize("n", [2, 3])
def test_each_collective_on_device_arrays_matches_numpy(tmp_path, n, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    ok(ranks(n, "nccl_collectives.py", tmp_path, timeout=90))
    for r in range(n):
        log = _log(tmp_path / f"collectives{r}.json")
        assert COLLECTIVES <= {x[0] for x in log}
        # an all-to-all is one group of a send and a receive per rank, the same bytes each
        start = log.index(("groupStart",), next(i for i, x in enumerate(log) if x[0] == "send") - 1)
        group = log[start + 1:log.index(("groupEnd",), start)]
        assert [(x[0], x[3]) for x in group] == [(kind, peer) for peer in range(n) for kind in ("send", "recv")]
        assert len({x[1] for x in group}) == 1
        # every collective on NCCL's stream, between the stream's wait for an event of the compute stream and an
        # event of its own that the compute stream waits for (the host never waits)
        (stream,) = {x[1] for x in log if x[0] == "stream" and x[2]}
        inside, covered = None, 0
        for i, x in enumerate(log):
            if x[:2] == ("wait", stream):
                assert log[i - 1][:3] == ("record", x[2], 0) and inside is None
                inside = []
            elif x[0] == "record" and x[2] == stream:
                assert inside and log[i + 1] == ("wait", 0, x[1]), (inside, log[i + 1])
                covered += sum(c[0] in COLLECTIVES for c in inside)
                inside = None
            elif inside is not None:
                assert x[0] in COLLECTIVES or x[0] in ("groupStart", "groupEnd", "captured"), x
                assert x[0] not in COLLECTIVES or x[3 if x[0] == "allReduce" else -1] == stream, x
                inside.append(x)
        assert covered == sum(x[0] in COLLECTIVES for x in log) > 0
        # the recorded all-to-all joined the capture: it ran only when the graph was launched
        # (its events recorded in the capture too)
        done = log[-1][2]
        assert log[-4:] == [("groupEnd",), ("captured", "group", stream), ("record", done, stream, True),
                            ("wait", 0, done)]


def _program(tmp_path, n, mode, accounted=2, timeout=120):
    out = tmp_path / f"{mode}{n}"
    out.mkdir()
    ok(ranks(n, "gpu_boxing.py", out, accounted, 3, timeout=timeout))
    return out, [json.loads((out / f"account{r}.json").read_text()) for r in range(max(n, 1))]


def _like_one_process(one, two, rtol=2e-5, atol=2e-6):
    want, got = dict(np.load(one / "result.npz")), dict(np.load(two / "result.npz"))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def test_the_hybrid_mlp_on_emulated_gpu_ranks_boxes_through_nccl_inside_the_step_graph(tmp_path, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    monkeypatch.setenv("GPU_BOXING", "double")
    one, (alone,) = _program(tmp_path, 0, "one")
    two, accounts = _program(tmp_path, 2, "nccl")
    _like_one_process(one, two)
    assert alone["backend"] == "cupy-emulated" and alone["boxing"] == []
    for d in accounts:
        assert d["backend"] == "cupy-emulated"
        boxing = d["boxing"]
        assert {b.split(" (")[1][:-1] for b in boxing} == {
            "mpi_allgather", "mpi_reduce_scatter", "mpi_all_to_all", "mpi_sparse_softmax_cross_entropy_class_split"
        }, boxing
        count = d["account"]
        # the step is recorded as one graph: no boxing node runs live beside it; only the check that every rank
        # runs the same step (and was fed the same arrays) does, on the host by design (flowjob_mpi.agreement)
        assert count["recorded"] and count["graphs"] == 1, count
        assert count["live_nodes"] == ["System-MPI-StepCheck (mpi_step_check)"], count
        # the host traffic of each boxing node's kernel, run one by one from Python: none
        assert sorted(d["traffic"]) == sorted(b.split(" (")[0] for b in boxing)
        assert all(seen == [0, 0] for seen in d["traffic"].values()), d["traffic"]
        log = d["log"]
        captured = [x[1] for x in log if x[0] == "captured"]
        # 3 all-gathers, 4 reduce-scatters, the softmax's max, sum and loss all-reduces, and the all-to-all that
        # moves the softmax's gradient to another split axis (one group of sends and receives): each recorded once
        assert sorted(captured) == (["allGather"] * 3 + ["allReduce"] * 3 + ["group"] + ["reduceScatter"] * 4
                                    ), captured
        # device addresses: the double resolved them into the emulated arrays' memory; nothing went through MPI
        # host buffers (the MPI path's kernels), as the traffic count says


def test_the_partial_fc_face_head_on_emulated_gpu_ranks_reduces_its_split_softmax_through_nccl(tmp_path, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    one, two, logs = (tmp_path / name for name in ("one", "two", "logs"))
    for folder in (one, two, logs):
        folder.mkdir()
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FAKE_NCCL_EMULATED", "1")
    monkeypatch.setenv("FAKE_NCCL_LOG", str(logs))
    ok(ranks(0, "face_head.py", 3, one, 16, timeout=60))
    ok(ranks(2, "with_fake_nccl.py", "face_head.py", 3, two, 16, timeout=120))
    _like_one_process(one, two)
    for r in range(2):
        log = _log(logs / f"nccl{r}.json")
        # the class-split softmax's row maxima (NCCL_MAX), sums and losses, recorded into the step's graph
        reductions = [x[-1] for x in log if x[0] == "allReduce"]
        assert reductions.count("NCCL_MAX") >= 1 and reductions.count("NCCL_SUM") >= 2, reductions
        assert ("captured", "allReduce") in {x[:2] for x in log}


def test_data_parallel_training_on_three_emulated_gpu_ranks_gathers_uneven_rows_through_nccl(tmp_path, monkeypatch):
    # rows 4, 3, 3: the returned per-row losses' all-gather is a group of NCCL broadcasts, one from each rank; the
    # gradients go through the bucket's allReduce
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    one, three, logs = (tmp_path / name for name in ("one", "three", "logs"))
    for folder in (one, three, logs):
        folder.mkdir()
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FAKE_NCCL_EMULATED", "1")
    monkeypatch.setenv("FAKE_NCCL_LOG", str(logs))
    ok(ranks(0, "train.py", "sgd", 10, 3, one, "rows", timeout=60))
    ok(ranks(3, "with_fake_nccl.py", "train.py", "sgd", 10, 3, three, "rows", timeout=120))
    _like_one_process(one, three)
    for r in range(3):
        log = _log(logs / f"nccl{r}.json")
        starts = [i for i, x in enumerate(log) if x == ("groupStart",)][1:]  # after the variables' broadcast
        groups = [log[i + 1:log.index(("groupEnd",), i)] for i in starts]
        assert groups and all([(x[0], x[3]) for x in g] == [("broadcast", 0), ("broadcast", 1), ("broadcast", 2)]
                              for g in groups), groups
        # each rank's rows of float32 losses: 4, 3, 3 rows
        assert all([x[1] for x in g] == [16, 12, 12] for g in groups), groups
        assert any(x[0] == "allReduce" for x in log)


def test_a_split_moved_to_another_axis_on_emulated_gpu_ranks_is_one_nccl_group_of_sends_and_receives(
        tmp_path, monkeypatch):
    # layout_cases.py's all-to-all program (test_layouts.py runs it on CPU ranks): the table's rows, squared and
    # annotated split by columns, go through one group of a send and a receive per rank, with no host copy
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "layout_cases.py", "alltoall", one, timeout=60))
    ok(ranks(2, "gpu_all_to_all.py", two, timeout=120))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=2e-5, atol=2e-6)
    text = (two / "dump.txt").read_text()
    assert ("Square_1-boxing/out_0: (8, 3):float32 S(1) = mpi_all_to_all(Square_1/out_0) {concat_axis=0, ranks=2, "
            "split_axis=1}") in text, text
    for r in range(2):
        d = json.loads((two / f"account{r}.json").read_text())
        assert d["backend"] == "cupy-emulated" and d["all_to_all"] == ["Square_1-boxing"], d
        # the node's kernel, called from Python on a step: no host synchronization, no copy
        assert d["traffic"] == {"Square_1-boxing": [0, 0]}, d["traffic"]
        log = [tuple(x) for x in d["log"]]
        starts = [i for i, x in enumerate(log) if x == ("groupStart",)]
        groups = [log[i + 1:log.index(("groupEnd",), i)] for i in starts]
        # a step live, one recorded (its group joined the step's graph), one more counted: each rank's (4, 6)
        # piece cut into two (4, 3) blocks of float32, 48 bytes to each rank and 48 from each
        assert len(groups) == 3 and all([(x[0], x[1], x[3]) for x in g] == [
            ("send", 48, 0), ("recv", 48, 0), ("send", 48, 1), ("recv", 48, 1)] for g in groups), groups
        assert ("captured", "group") in {x[:2] for x in log}, log


def test_the_mpi_path_on_the_same_ranks_copies_through_the_host_in_every_boxing_node(tmp_path, monkeypatch):
    # the counts of the test above can fail: on the MPI path every boxing node reads back to the host and runs live
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    monkeypatch.setenv("GPU_BOXING", "mpi")
    _, accounts = _program(tmp_path, 2, "mpi")
    for d in accounts:
        assert not any(x[0] == "communicator" for x in d["log"])
        assert set(d["boxing"]) <= set(d["account"]["live_nodes"])
        assert all(syncs >= 1 and copies >= 2 for syncs, copies in d["traffic"].values()), d["traffic"]


# real devices --------------------------------------------------------------------------------------

def _devices_missing() -> str:
    runtime, missing = nccl.load_runtime()
    if runtime is None:
        return missing
    count = runtime.cp.cuda.runtime.getDeviceCount()
    return "" if count >= 2 else f"2 ranks need 2 CUDA devices (NCCL refuses two ranks on one), CuPy sees {count}"


def test_the_hybrid_mlp_on_two_gpu_ranks_boxes_through_real_nccl(tmp_path, monkeypatch):
    missing = _devices_missing()
    if missing:
        pytest.skip(f"no NCCL path here: {missing}")
    monkeypatch.setenv(nccl.VARIABLE, "nccl")
    monkeypatch.setenv("GPU_BOXING", "device")
    one, _ = _program(tmp_path, 0, "one", timeout=180)
    two, accounts = _program(tmp_path, 2, "device", timeout=180)
    _like_one_process(one, two, rtol=1e-4, atol=1e-5)  # the same kernels on both: summation order only
    for d in accounts:
        count = d["account"]
        assert d["backend"] == "cupy" and count["recorded"], count
        assert not set(d["boxing"]) & set(count["live_nodes"]), count
